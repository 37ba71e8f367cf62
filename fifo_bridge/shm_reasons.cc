#include "fifo_bridge/shm_reasons.h"

namespace vsocket::fifo {

const ShmReasons& ShmReason() {
  // The meanings are the README's table (vsocket-reasons --markdown).
  static const ShmReasons reasons = {
      .pid_namespace = RegisterFallbackReason(
          "pid_namespace",
          "the peer runs in another PID namespace on the same network namespace "
          "(containers on the host network, Kubernetes `hostNetwork`): pids mean other "
          "processes on each side, so no memory is shared. The side that finds out "
          "names it; a client whose offer was declined for it says `claim_declined`"),
      .shm_setup_failed = RegisterFallbackReason(
          "shm_setup_failed",
          "the segment or a socket could not be created (see the log)"),
      .rendezvous_name_in_use = RegisterFallbackReason(
          "rendezvous_name_in_use",
          "a name for this 4-tuple was taken by a live process (a port the "
          "application bound itself; a port vsocket picks skips taken names)"),
      .claim_timeout = RegisterFallbackReason(
          "claim_timeout", "the listener did not claim the offer in time"),
      .peer_spoke_tcp = RegisterFallbackReason(
          "peer_spoke_tcp",
          "bytes or EOF came over TCP before a claim: the listener is plain"),
      .invalid_offer = RegisterFallbackReason(
          "invalid_offer", "the client's segment failed validation (server side)"),
      .offer_revoked = RegisterFallbackReason(
          "offer_revoked", "the client withdrew its offer before the server accepted"),
      .claim_declined = RegisterFallbackReason(
          "claim_declined",
          "the accepting process could not claim the offer (it runs as another user "
          "than the one that listened, e.g. nginx's workers) and told the client at "
          "once"),
      .connection_limit = RegisterFallbackReason(
          "connection_limit",
          "`VSOCKET_MAX_SHM_CONNECTIONS` connections are already on shared memory"),
  };
  return reasons;
}

}  // namespace vsocket::fifo
