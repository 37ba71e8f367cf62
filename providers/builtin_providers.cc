// The one place that names the transports a library is built with, in
// priority order (vsocket/provider_registry.h).  Linked into libvsocket
// (.so/.a) and libvsocket_preload.so; the core itself includes no backend.
//
// Adding a transport: its folder provides a TransportProvider and declares
// itself with vsocket_backend() (cmake/backends.cmake), which defines
// VSOCKET_HAVE_<NAME> here when the build has it; add one RegisterProvider
// line below, at its priority.
#include "fifo_bridge/shm_provider.h"
#include "vsocket/provider_registry.h"
#if VSOCKET_HAVE_RDMA
#include "rdma_backend/rdma_provider.h"
#endif
#if VSOCKET_HAVE_TOE
#include "toe_backend/toe_provider.h"
#endif

namespace vsocket {

void InstallBuiltinProviders() {
  // Same host first: shared memory never leaves it, and for a local peer
  // its decline ends the walk.
  RegisterProvider(fifo::ShmProvider());
#if VSOCKET_HAVE_RDMA
  RegisterProvider(rdma::RdmaProvider());
#endif
#if VSOCKET_HAVE_TOE
  // Last: kernel TCP driven by an engine; only when forced (toe_provider.h).
  RegisterProvider(toe::ToeProvider());
#endif
}

}  // namespace vsocket
