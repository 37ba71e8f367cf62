#include "vsocket/kernel_wait.h"

#if VSOCKET_HAVE_RDMA
#include "rdma_backend/rdma_transport.h"
#endif

namespace vsocket {

void BeforeKernelWait() {
#if VSOCKET_HAVE_RDMA
  rdma::RdmaTransport::ArmDeferred();
#endif
}

}  // namespace vsocket
