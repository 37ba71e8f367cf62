#include "vsocket/kernel_wait.h"

#include "vsocket/provider_registry.h"

namespace vsocket {

void BeforeKernelWait() { ProvidersBeforeKernelWait(); }

}  // namespace vsocket
