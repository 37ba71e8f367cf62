// ShmChannel's user-space readiness (Transport::PollUserSpace) and the
// poller hold that keeps producers from ringing while a poller watches the
// rings (vsocket/user_space_holds.h).  Any thread of any process holding
// the connection; only atomics of the shared control words are touched,
// never a lock, so a poller never waits for a reader or writer.
#include <poll.h>

#include "fifo_bridge/shm_channel.h"

namespace vsocket::fifo {

Transport::UserSpaceReadiness ShmChannel::PollReadiness(uint32_t wanted) {
  // Called for every watched connection on every look of a busy poller:
  // the lines read here are our own or rarely written, except the peer's
  // index for the direction asked about.
  Transport::UserSpaceReadiness r;
  // Before the peer attached, the kernel's view of the user's descriptor
  // is the exact one.  (A peer's move in progress still shows true
  // events: our ring drains and our sends go to TCP.)
  if (!attached_.load(std::memory_order_relaxed) && !PeerAttached()) return r;
  uint32_t local = side_->local_flags.load(std::memory_order_acquire);
  uint32_t flags = rx_->flags.load(std::memory_order_acquire) |
                   tx_->flags.load(std::memory_order_acquire);
  if ((local & (kLocalShutRead | kLocalShutWrite | kLocalPeerGone |
                kLocalReset | kLocalRevoked | kLocalTxOnTcp)) ||
      (flags & (kProducerClosed | kConsumerClosed | kReset))) {
    // End of stream, an error or a move: make sure the user's descriptor
    // shows it (POLLRDHUP/POLLHUP), and let the kernel report it.
    UpdateHangup();
    return r;
  }
  if (wanted & POLLIN) {
    // Afresh: EPOLLET's edge is any byte published since the last report.
    int64_t readable = consumer_->AvailableNow();
    if (readable < 0) return r;  // corrupt: the next receive resets
    // Beyond SO_RCVLOWAT's mark (readable_above is 0 unless it was set:
    // the same single compare as "any byte").
    if (readable > static_cast<int64_t>(side_->readable_above.load(std::memory_order_relaxed)))
      r.events |= POLLIN;
    r.arrivals = side_->tail + static_cast<uint64_t>(readable);
  }
  if (wanted & POLLOUT) {
    int64_t room = producer_->FreeSpace();
    if (room < 0) return r;
    // Writable as the kernel sees the user's descriptor: not blocked (no
    // filler; the consumer lifts it at half the window, shm_wakeup.cc), and
    // a write now would not block our writes.
    if (room > 0 && room >= static_cast<int64_t>(BlockThreshold()) &&
        !(tx_->writer_wake.load(std::memory_order_relaxed) & kWriterBlocked))
      r.events |= POLLOUT;
  }
  r.exact = true;
  return r;
}

bool ShmChannel::TakePollerHold() {
  // A blocking receive asleep on the wait socket needs the peer's wake-up.
  if (stopped() || side_->kernel_sleepers.load(std::memory_order_seq_cst) != 0) {
    return false;
  }
  uint32_t spinners = side_->spinners.fetch_or(kSpinnersPollerHold,
                                               std::memory_order_seq_cst);
  if (spinners == 0) {
    rx_->reader_wake.fetch_and(~kReaderArmed, std::memory_order_seq_cst);
    // A drop between our two steps re-armed before we disarmed: re-arm.
    if (side_->spinners.load(std::memory_order_seq_cst) == 0) Rearm();
  }
  // A receive that went to sleep meanwhile (it counts itself, then drops
  // holds; we hold, then look): give this one back at once.
  if (side_->kernel_sleepers.load(std::memory_order_seq_cst) != 0) {
    DropUserSpaceHold();
    return false;
  }
  return true;
}

void ShmChannel::DropUserSpaceHold() {
  if (!(side_->spinners.load(std::memory_order_acquire) & kSpinnersPollerHold))
    return;
  uint32_t before = side_->spinners.fetch_and(~kSpinnersPollerHold,
                                              std::memory_order_seq_cst);
  if (before == kSpinnersPollerHold) Rearm();
}

void ShmChannel::NoteKernelSleeper(bool asleep) {
  if (!asleep) {
    side_->kernel_sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return;
  }
  side_->kernel_sleepers.fetch_add(1, std::memory_order_seq_cst);
  DropUserSpaceHold();
}

}  // namespace vsocket::fifo
