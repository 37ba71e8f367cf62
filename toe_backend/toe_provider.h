// The TCP offload engine as a provider (vsocket/transport_provider.h): a
// ToeTransport (toe_transport.h) over the io_uring engine for connections
// whose peer is reached over kernel TCP.
//
// Policy: only when forced (VSOCKET_TRANSPORT=toe), on the connecting and
// the listening side.  `auto` never picks it: in the measurements so far
// it helped nowhere enough to be the default (docs/BENCHMARKS.md, "toe"),
// so auto keeps plain kernel TCP; the decline does not apply, so path
// selection's reason stays the other providers'.  Forced but io_uring
// cannot be used in this process: kernel TCP with io_uring_unavailable.
// Blocking: none; nothing is negotiated with the peer, which may be any
// TCP program.
#ifndef VSOCKET_TOE_BACKEND_TOE_PROVIDER_H_
#define VSOCKET_TOE_BACKEND_TOE_PROVIDER_H_

#include "vsocket/transport_provider.h"

namespace vsocket::toe {

// The process's one toe provider (static lifetime).
TransportProvider* ToeProvider();

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_TOE_PROVIDER_H_
