// How far a listener has got through this process's offers to it, so that
// an offer's claim deadline (VSOCKET_CLAIM_TIMEOUT_MS) measures a listener
// that stopped claiming, not one that is behind.  A burst of connections
// (ten thousand at once) queues thousands in the kernel's accept queue; a
// listener that works through them in order, claiming our earlier offers,
// reaches each later one in time, however long the queue.  So an offer
// whose deadline passed may wait one timeout more after the listener's
// latest claim of an offer of ours, as long as every offer of ours it
// claimed was made before this one (the queue has not passed it: an
// acceptor that does not claim, or a sibling listener, leaves it to the
// ordinary deadline).  Keyed by the listener marker's pid.
//
// Threads: any (one mutex, taken once per claim seen and per deadline
// passed).  A forked child keeps its parent's record: the same listeners.
#ifndef VSOCKET_FIFO_BRIDGE_CLAIM_PROGRESS_H_
#define VSOCKET_FIFO_BRIDGE_CLAIM_PROGRESS_H_

#include <sys/types.h>

#include <cstdint>

namespace vsocket::fifo {

// A client saw its offer, made at `made_ns` (CLOCK_MONOTONIC) to the
// listener of `listener`, claimed at `seen_ns`.  REQUIRES: listener > 0.
void NoteOfferClaimed(pid_t listener, int64_t made_ns, int64_t seen_ns);

// The time an unclaimed offer made at `made_ns` to `listener` may wait
// for its claim by the listener's progress: its latest claim seen plus
// `timeout_ns`, or 0 when it claimed none of ours, or one made after this
// offer.
int64_t ClaimDeadlineByProgress(pid_t listener, int64_t made_ns, int64_t timeout_ns);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_CLAIM_PROGRESS_H_
