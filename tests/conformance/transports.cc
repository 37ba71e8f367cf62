#include "transports.h"

namespace conformance {

std::vector<Transport> HostTransports() {
  return {{"kernel", &KernelApi(), nullptr},
          {"tcp", &VsocketApi(), "tcp"},
          {"shm", &VsocketApi(), "shm"},
#if VSOCKET_HAVE_TOE
          {"toe", &VsocketApi(), "toe"},
#endif
  };
}

std::vector<Transport> RdmaTransports() {
  return {{"kernel", &KernelApi(), nullptr}, {"rdma", &VsocketApi(), "rdma"}};
}

}  // namespace conformance
