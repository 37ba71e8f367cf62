// The RDMA backend's own fallback reasons, registered with the core's
// registry (vsocket/fallback_reason.h), which numbers them for this
// process.  The reasons it shares with other fabrics (peer_not_vsocket,
// peer_not_local, fd_limit, ...) are the core's.
//
// Threading: RdmaReason() registers them on its first call (RdmaProvider()
// makes it when the provider is installed); any thread, lock-free after.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_REASONS_H_
#define VSOCKET_RDMA_BACKEND_RDMA_REASONS_H_

#include "vsocket/fallback_reason.h"

namespace vsocket::rdma {

struct RdmaReasons {
  FallbackReason no_rdma_device;     // no local RDMA device, or none reaches the peer
  FallbackReason rdma_probe_failed;  // the peer's RDMA CM did not answer in time
  FallbackReason rdma_memory_limit;  // registered-memory limits (ours) would be exceeded
  FallbackReason rdma_setup_failed;  // channel setup failed, or the pairing was lost
  // The peer is vsocket but declined RDMA (wire_format.h).
  FallbackReason peer_rdma_memory_limit;  // for its rdma_memory_limit
  FallbackReason peer_declined_rdma;      // for a cause this version does not know
};

const RdmaReasons& RdmaReason();

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_REASONS_H_
