#include "vsocket/kernel_wait.h"

#include "vsocket/provider_registry.h"
#include "vsocket/user_space_holds.h"

namespace vsocket {

void BeforeKernelWait() {
  DropAllUserSpaceHolds();
  ProvidersBeforeKernelWait();
}

}  // namespace vsocket
