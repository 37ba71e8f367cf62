// RDMA (librdmacm + RC queue pairs) as a provider
// (vsocket/transport_provider.h): the client's bounded RDMA CM probe before
// the SYN (rdma_negotiation.h), the RDMA CM listener beside a kernel
// listener and the pairing in accept (rdma_acceptor.h), and the deferred
// completion-queue arming before a kernel wait (rdma_transport.h).
//
// In the default policy it is asked only for peers on another host (the
// shared-memory provider ends path selection for this host); forced
// (VSOCKET_TRANSPORT=rdma) it goes to this host too.  IPv4 only.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_PROVIDER_H_
#define VSOCKET_RDMA_BACKEND_RDMA_PROVIDER_H_

#include "vsocket/transport_provider.h"

namespace vsocket::rdma {

inline constexpr TransportKind kRdmaKind = static_cast<TransportKind>(2);

// The process's one RDMA provider (static lifetime).
TransportProvider* RdmaProvider();

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_PROVIDER_H_
