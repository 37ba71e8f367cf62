// ShmChannel's wake-up protocol (docs/PROTOCOL.md): when a producer sends
// its consumer a wake-up datagram, how the consumer drains them, the
// writer's filler block, the busy-poll count that disarms the reader, and
// the hang-up readiness (POLLRDHUP/POLLHUP) of the user's descriptor.
// Any thread of either process may run these; the flags they use are
// atomics in the shared ring control words.
#include "fifo_bridge/shm_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "base/real_libc.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

namespace {

// Sets PENDING|RINGING unless PENDING is already set.  True when the caller
// must now queue the wake-up datagram and then call EndRinging.
bool BeginRinging(RingControl* ring) {
  uint32_t wake = ring->reader_wake.load(std::memory_order_relaxed);
  do {
    if (wake & kReaderPending) return false;
  } while (!ring->reader_wake.compare_exchange_weak(
      wake, wake | kReaderPending | kReaderRinging, std::memory_order_seq_cst));
  return true;
}

void EndRinging(RingControl* ring) {
  ring->reader_wake.fetch_and(~kReaderRinging, std::memory_order_seq_cst);
}

// Before a consumer drains its wake-ups: let a producer that is between
// setting PENDING and queueing its datagram finish (bounded: a producer
// that stalls longer costs one spurious wake-up, never a lost one).
void AwaitRingers(RingControl* ring) {
  SpinUntil(
      [ring] {
        return !(ring->reader_wake.load(std::memory_order_acquire) &
                 kReaderRinging);
      },
      [] { return false; }, 50000);
}

}  // namespace

void ShmChannel::NotifyReader() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t wake = tx_->reader_wake.load(std::memory_order_relaxed);
  if (!(wake & kReaderArmed) || (wake & kReaderPending)) return;
  if (!BeginRinging(tx_)) return;
  // Before the claim the server's wait socket does not exist; the server
  // looks at the ring when it claims (AfterClaim).
  if (PeerAttached()) doorbell_->RingPeer();
  EndRinging(tx_);
}

void ShmChannel::SignalSelf() {
  if (BeginRinging(rx_)) {
    doorbell_->RingSelf();
    EndRinging(rx_);
  }
}

void ShmChannel::AfterConsume(bool force_drain) {
  if (consumer_->Available() != 0) return;
  if (rx_->flags.load(std::memory_order_acquire) & (kProducerClosed | kReset))
    return;  // EOF stays readable
  if (side_->local_flags.load(std::memory_order_acquire) &
      (kLocalPeerGone | kLocalReset | kLocalShutRead))
    return;
  uint32_t wake = rx_->reader_wake.load(std::memory_order_relaxed);
  if (!(wake & kReaderPending) && !force_drain) return;
  // Drain first, then clear: a wake-up that lands in between leaves one
  // spare datagram, never a missing one.
  DrainOwnWakeups();
  if (consumer_->Available() != 0 ||
      (rx_->flags.load(std::memory_order_acquire) &
       (kProducerClosed | kReset))) {
    SignalSelf();
  }
}

Doorbell::Drained ShmChannel::DrainOwnWakeups() {
  AwaitRingers(rx_);
  // The watcher thread is inside no call on the descriptor, whose number
  // the application may close or reuse meanwhile.
  Doorbell::Drained drained = OnWatcherThread() ? doorbell_->DrainWakeupsChecked()
                                                : doorbell_->DrainWakeups();
  rx_->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
  // After the claim a 'D' is a stranger's: the server declines only before.
  if (drained.declined && role_ == ShmRole::kClient && !PeerAttached())
    events_->OnDeclineDrained(drained.declined_for_uid);
  return drained;
}

// Blocking and lifting are apart (hysteresis): the producer blocks when
// less than a quarter of its window is free and asks for the lift at half
// the window unconsumed (writer_lift), as kernel TCP wakes a writer only
// once a good part of its buffer is free.  Without the gap a streaming pair
// whose reader is the slower blocked and lifted on every message at the
// boundary (filler datagrams, a wake-up of the consumer's watcher and a
// drain each time).  writer_lift is the peer's word: a wrong one only
// lifts the peer's own block early or late (at the latest when the ring is
// empty), never stalls us.
void ShmChannel::LiftPeerWriterBlock() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Acquire: writer_lift was stored before the flag.
  if (!(rx_->writer_wake.load(std::memory_order_acquire) & kWriterBlocked))
    return;
  int64_t available = consumer_->AvailableNow();
  if (available < 0) return;
  uint64_t capacity = consumer_->capacity();
  uint64_t lift = rx_->writer_lift.load(std::memory_order_relaxed);
  uint64_t limit = lift == 0 ? capacity - capacity / 4 : std::min(lift, capacity);
  if (static_cast<uint64_t>(available) > limit) return;
  if (rx_->writer_wake.fetch_and(~kWriterBlocked, std::memory_order_seq_cst) &
      kWriterBlocked) {
    // The peer's filler sits in our wait socket with our wake-ups: drain
    // them all, then ring ourselves if the socket must stay readable.
    DrainOwnWakeups();
    if (consumer_->Available() != 0 ||
        (rx_->flags.load(std::memory_order_acquire) & (kProducerClosed | kReset)) ||
        (side_->local_flags.load(std::memory_order_acquire) &
         (kLocalPeerGone | kLocalReset | kLocalShutRead))) {
      SignalSelf();
    }
  }
}

bool ShmChannel::WakePeerWatcher() {
  const SegmentHeader* header = segment_->header();
  uint32_t pid = __atomic_load_n(
      role_ == ShmRole::kClient ? &header->server_pid : &header->client_pid,
      __ATOMIC_RELAXED);
  return doorbell_->WakePeerWatcher(static_cast<pid_t>(pid)) == 0;
}

bool ShmChannel::BlockOurWrites() {
  if (tx_->writer_wake.load(std::memory_order_acquire) & kWriterBlocked) return true;
  // The peer gone, or its socket shut down reading: writes fail.
  if (doorbell_->FillSendBuffer() != 0) return false;
  uint64_t window = producer_->window();
  uint64_t lift = window / 2;
  tx_->writer_lift.store(static_cast<uint32_t>(lift), std::memory_order_relaxed);
  tx_->writer_wake.fetch_or(kWriterBlocked, std::memory_order_seq_cst);
  int64_t free_bytes = producer_->FreeSpaceNow();
  if (free_bytes >= 0 && static_cast<uint64_t>(free_bytes) >= window - lift) {
    // The consumer freed space concurrently and may have missed the flag:
    // ask its watcher thread to drain our filler.  (Our filler already
    // makes its wait socket readable; only if its watcher cannot be asked
    // do we add a wake-up it will drain, with kReaderPending.)
    if (!WakePeerWatcher() && BeginRinging(tx_)) {
      doorbell_->RingPeer();
      EndRinging(tx_);
    }
  }
  return true;
}

void ShmChannel::UpdateHangup() {
  uint32_t local = side_->local_flags.load(std::memory_order_acquire);
  if ((local & (kLocalHangupShown | kLocalRevoked)) || !PeerAttached()) return;
  uint32_t ring_flags = rx_->flags.load(std::memory_order_acquire) |
                        tx_->flags.load(std::memory_order_acquire);
  bool reset = (ring_flags & kReset) ||
               (local & (kLocalReset | kLocalResetReported)) ||
               ((local & kLocalPeerGone) &&
                side_->pending_error.load(std::memory_order_relaxed) != 0);
  bool read_closed = reset ||
                     (rx_->flags.load(std::memory_order_acquire) &
                      kProducerClosed) ||
                     (local & (kLocalPeerGone | kLocalShutRead));
  // A send after the peer's close stands for the RST kernel TCP would
  // have drawn: from then on the kernel shows POLLHUP too.
  bool write_closed = local & (kLocalShutWrite | kLocalSentToClosedPeer);
  if (reset || (read_closed && write_closed)) {
    if (!(side_->local_flags.fetch_or(kLocalHangupShown,
                                      std::memory_order_acq_rel) &
          kLocalHangupShown)) {
      doorbell_->ShutdownWaitSocket(SHUT_RDWR);
    }
  } else if (read_closed && !(local & kLocalReadHangupShown)) {
    if (!(side_->local_flags.fetch_or(kLocalReadHangupShown,
                                      std::memory_order_acq_rel) &
          kLocalReadHangupShown)) {
      doorbell_->ShutdownWaitSocket(SHUT_RD);
    }
  }
}

void ShmChannel::BeginSpin() {
  local_spinners_.fetch_add(1, std::memory_order_relaxed);
  if (side_->spinners.fetch_add(1, std::memory_order_seq_cst) == 0)
    rx_->reader_wake.fetch_and(~kReaderArmed, std::memory_order_seq_cst);
}

void ShmChannel::EndSpin() {
  local_spinners_.fetch_sub(1, std::memory_order_relaxed);
  RemoveSpinners(1);
}

void ShmChannel::RemoveSpinners(uint32_t count) {
  if (side_->spinners.fetch_sub(count, std::memory_order_seq_cst) != count)
    return;
  Rearm();
}

void ShmChannel::Rearm() {
  rx_->reader_wake.fetch_or(kReaderArmed, std::memory_order_seq_cst);
  if (consumer_->Available() != 0) SignalSelf();
}

void ShmChannel::ResetConnection(const char* why) {
  VSOCKET_LOG(kWarn, "shared-memory connection reset: %s", why);
  side_->local_flags.fetch_or(kLocalReset, std::memory_order_seq_cst);
  side_->pending_error.store(ECONNRESET, std::memory_order_relaxed);
  tx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
  rx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
  tx_->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
  if (PeerAttached()) {
    WakePeerWatcher();  // first: it raises the peer's hang-up
    doorbell_->RingPeer();
  }
  doorbell_->RingSelf();
  UpdateHangup();
}

}  // namespace vsocket::fifo
