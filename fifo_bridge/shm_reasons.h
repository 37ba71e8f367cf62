// The shared-memory transport's own fallback reasons, registered with the
// core's registry (vsocket/fallback_reason.h), which numbers them for this
// process.  The reasons it shares with other fabrics (peer_not_vsocket,
// uid_mismatch, fd_limit, ...) are the core's.
//
// Threading: ShmReason() registers them on its first call (ShmProvider()
// makes it when the provider is installed); any thread, lock-free after.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_REASONS_H_
#define VSOCKET_FIFO_BRIDGE_SHM_REASONS_H_

#include "vsocket/fallback_reason.h"

namespace vsocket::fifo {

struct ShmReasons {
  FallbackReason pid_namespace;           // peer in another PID namespace
  FallbackReason shm_setup_failed;        // could not create or map the ring segment
  FallbackReason rendezvous_name_in_use;  // a doorbell name for this 4-tuple is taken
  FallbackReason claim_timeout;           // the server never claimed the offer
  FallbackReason peer_spoke_tcp;          // bytes arrived on TCP before a claim: plain peer
  FallbackReason invalid_offer;           // the client's segment failed validation
  FallbackReason offer_revoked;           // the client gave up on the offer before accept
  FallbackReason claim_declined;          // the accepting process could not claim the offer
  FallbackReason connection_limit;        // VSOCKET_MAX_SHM_CONNECTIONS reached
};

const ShmReasons& ShmReason();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_REASONS_H_
