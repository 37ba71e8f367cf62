// The intra-host shared-memory transport as a provider
// (vsocket/transport_provider.h): the client's offer (segment + doorbell
// named by the connection key, made before the SYN), the server's listener
// marker and its claim in accept (docs/PROTOCOL.md).
//
// Applies only to a peer in this host's network namespace; for it, a
// decline (no vsocket listener, another user, setup failure) ends path
// selection: the same host never tries another fabric.
// Blocking: none of the steps waits for the peer.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_PROVIDER_H_
#define VSOCKET_FIFO_BRIDGE_SHM_PROVIDER_H_

#include "vsocket/transport_provider.h"

namespace vsocket::fifo {

inline constexpr TransportKind kShmKind = static_cast<TransportKind>(1);

// The process's one shared-memory provider (static lifetime).
TransportProvider* ShmProvider();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_PROVIDER_H_
