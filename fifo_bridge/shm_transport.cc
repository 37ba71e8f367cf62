// ShmTransport (shm_transport.h): construction, and the socket calls other
// than send and receive (shutdown, FIONREAD, SO_ERROR, the stale wake-up
// filter, fork).  The rest, one concern a file:
//   shm_data_path.cc  the StreamSteps of send/recv (vsocket/stream_io.h)
//   shm_wakeup.cc     the wake-up protocol and hang-up readiness
//   shm_revoke.cc     liveness, the unclaimed offer, revoke and replay
//   shm_release.cc    the last close
//   shm_zerocopy.cc   in-place receive; shm_handover.cc: exec hand-over
#include "fifo_bridge/shm_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "base/real_libc.h"
#include "fifo_bridge/claim_progress.h"
#include "fifo_bridge/shm_provider.h"
#include "vsocket/config.h"
#include "vsocket/log.h"

namespace vsocket::fifo {


namespace sys = ::vsocket::sys;

static_assert(sizeof(SegmentHeader) <= kClientSideStateSlot &&
              sizeof(SideState) <= kSideStateSlotBytes &&
              kServerSideStateSlot + kSideStateSlotBytes <= kSegmentHeaderBytes &&
              kClientSideStateSlot % alignof(SideState) == 0 &&
              kServerSideStateSlot % alignof(SideState) == 0);

std::unique_ptr<ShmTransport> ShmTransport::Create(
    Role role, std::unique_ptr<ShmSegment> segment,
    std::unique_ptr<Doorbell> doorbell, int tcp_fd, int64_t claim_deadline_ns) {
  bool client = role == Role::kClient;
  int side_fd = -1;
  SideState* side = segment->sealed()
                        ? CreateSideState(&side_fd)
                        : InitSideStateIn(segment->side_state_slot(client));
  if (!side) return nullptr;
  std::unique_ptr<ShmTransport> t =
      Assemble(role, std::move(segment), std::move(doorbell), side, side_fd,
               tcp_fd, claim_deadline_ns, /*claimed=*/!client);
  if (!client) {
    WatchWakes(t->doorbell_->my_wake_name(), t.get());
    t->wakes_watched_ = true;
  }
  return t;
}

void ShmTransport::StartWatching() {
  // Watch from the start: before the claim, bytes or EOF on TCP mean the
  // listener was a plain program or died (CheckLiveness revokes the offer).
  // Not from inside Create(): a revoke that ran before the wait socket was
  // on the user's number dup'ed TCP onto the private number, which the
  // install then closed under the successor (EBADF; found by the kill loop).
  WatchLiveness(tcp_fd_, this);
  watched_ = true;
  // The claim deadline holds even while the application only sleeps; the
  // listener's life is looked at before it (OnDeadline).
  WatchDeadline(this, NextUnclaimedLook(MonotonicNs()));
  WatchWakes(doorbell_->my_wake_name(), this);
  wakes_watched_ = true;
}

std::unique_ptr<ShmTransport> ShmTransport::Assemble(
    Role role, std::unique_ptr<ShmSegment> segment,
    std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
    int tcp_fd, int64_t claim_deadline_ns, bool claimed) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  bool client = role == Role::kClient;
  Direction tx = client ? Direction::kClientToServer : Direction::kServerToClient;
  Direction rx = client ? Direction::kServerToClient : Direction::kClientToServer;
  uint64_t capacity = segment->capacity();
  t->role_ = role;
  t->side_ = side;
  t->side_fd_ = side_fd;
  t->side_in_segment_ = side_fd < 0 && !segment->sealed();
  t->tx_ = segment->control(tx);
  t->rx_ = segment->control(rx);
  t->producer_ = std::make_unique<RingProducer>(t->tx_, segment->data(tx),
                                                capacity, &side->head);
  t->consumer_ = std::make_unique<RingConsumer>(t->rx_, segment->data(rx),
                                                capacity, &side->tail);
  t->segment_ = std::move(segment);
  t->doorbell_ = std::move(doorbell);
  t->tcp_fd_ = tcp_fd;
  t->claim_deadline_ns_.store(claim_deadline_ns, std::memory_order_relaxed);
  t->offer_made_ns_ = claim_deadline_ns - int64_t{GetConfig().claim_timeout_ms} * 1000000;
  t->claimed_.store(claimed, std::memory_order_relaxed);
  return t;
}

ShmTransport::~ShmTransport() {
  if (wakes_watched_) UnwatchWakes(doorbell_->my_wake_name(), this);
  // A slot of the segment goes with the segment's mapping.
  if (side_ && !side_in_segment_) DestroySideState(side_, side_fd_);
}

namespace {

// What the kernel gives a socket whose application set nothing: the
// initial tcp_wmem and tcp_rmem (the kernel grows them with use; a peer that
// reads nothing keeps them there).
constexpr uint64_t kDefaultSendBuffer = 16384;
constexpr uint64_t kDefaultRecvBuffer = 131072;

uint32_t KernelBufferSize(int tcp_fd, int name) {
  int value = 0;
  socklen_t len = sizeof(value);
  if (sys::getsockopt(tcp_fd, SOL_SOCKET, name, &value, &len) != 0 || value < 0)
    return 0;
  return static_cast<uint32_t>(value);
}

}  // namespace

void ShmTransport::BufferSizesChanged(uint32_t which) {
  if (Transport* next = MovedTo()) {
    next->BufferSizesChanged(which);
    return;
  }
  if (which & kSendBufferSet) {
    side_->send_buffer.store(KernelBufferSize(tcp_fd_, SO_SNDBUF),
                             std::memory_order_relaxed);
  }
  if (which & kRecvBufferSet) {
    rx_->recv_window.store(KernelBufferSize(tcp_fd_, SO_RCVBUF),
                           std::memory_order_seq_cst);
    // A larger window may let a blocked writer go on: let it look.
    LiftPeerWriterBlock();
    // SO_RCVLOWAT's cap follows the window.
    if (side_->readable_above.load(std::memory_order_relaxed) != 0) {
      uint32_t lowat = KernelBufferSize(tcp_fd_, SO_RCVLOWAT);
      RecvLowatChanged(lowat > 1 ? lowat : 1);
    }
  }
}

void ShmTransport::RecvLowatChanged(uint32_t lowat) {
  if (Transport* next = MovedTo()) {
    next->RecvLowatChanged(lowat);
    return;
  }
  // The mark must be reachable: our ring holds at most the peer's window,
  // which is the whole ring, or (once either end set a buffer size) its
  // SO_SNDBUF plus our SO_RCVBUF, at least recv_window or the kernel's
  // initial receive buffer (SendWindow).  As kernel TCP caps the mark at
  // half its receive buffer, the mark is capped at half of that.  A mark
  // above what the initial buffer allows is made room for as kernel TCP
  // does (it grows its receive buffer to twice the mark): our SO_RCVBUF,
  // as the kernel now reports it, becomes the peer's bound.
  uint64_t window = rx_->recv_window.load(std::memory_order_relaxed);
  if (window == 0 && lowat > kDefaultRecvBuffer / 2) {
    window = KernelBufferSize(tcp_fd_, SO_RCVBUF);
    rx_->recv_window.store(static_cast<uint32_t>(window), std::memory_order_seq_cst);
    LiftPeerWriterBlock();
  }
  uint64_t reach = std::min<uint64_t>(consumer_->capacity(),
                                      window ? window : kDefaultRecvBuffer) / 2;
  uint64_t mark = std::min<uint64_t>(lowat, std::max<uint64_t>(reach, 1));
  side_->readable_above.store(static_cast<uint32_t>(mark - 1), std::memory_order_seq_cst);
  // As the kernel's tcp_set_rcvlowat: what is queued may be enough now,
  // for a sleeper too.
  if (IsClaimed() && !revoked() && consumer_->AvailableNow() >= static_cast<int64_t>(mark))
    SignalSelf();
}

uint64_t ShmTransport::SendWindow() const {
  uint64_t ours = side_->send_buffer.load(std::memory_order_relaxed);
  uint64_t peers = tx_->recv_window.load(std::memory_order_relaxed);  // untrusted
  if (ours == 0 && peers == 0) return 0;
  uint64_t window = (ours ? ours : kDefaultSendBuffer) + (peers ? peers : kDefaultRecvBuffer);
  return std::max<uint64_t>(window, 4096);
}

uint32_t ShmTransport::capabilities() const {
  return ShmProvider()->capabilities();
}

bool ShmTransport::revoked() const {
  return side_->local_flags.load(std::memory_order_acquire) & kLocalRevoked;
}

bool ShmTransport::IsClaimed() {
  if (claimed_.load(std::memory_order_acquire)) return true;
  if (ClaimWasMade(segment_->header()->claim.load(std::memory_order_seq_cst))) {
    if (!claimed_.exchange(true, std::memory_order_acq_rel) && listener_pid_ > 0)
      NoteOfferClaimed(listener_pid_, offer_made_ns_, MonotonicNs());
    return true;
  }
  return false;
}

void ShmTransport::AfterClaim() {
  WatchLiveness(tcp_fd_, this);
  watched_ = true;
  rx_->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
  if (consumer_->Available() != 0 ||
      (rx_->flags.load(std::memory_order_acquire) &
       (kProducerClosed | kReset))) {
    SignalSelf();
  }
  UpdateHangup();
}


int ShmTransport::Shutdown(int how) {
  if (Transport* next = MovedTo()) return next->Shutdown(how);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  if (how == SHUT_RD || how == SHUT_RDWR) {
    side_->local_flags.fetch_or(kLocalShutRead, std::memory_order_seq_cst);
    doorbell_->RingSelf();
  }
  if (how == SHUT_WR || how == SHUT_RDWR) {
    SideLock lock(&side_->send_lock);
    PublishHeldLocked();  // the FIN follows what a cork held, as TCP's
    uint32_t before =
        side_->local_flags.fetch_or(kLocalShutWrite, std::memory_order_seq_cst);
    // Following the peer's move to TCP, our stream's end goes there too.
    if (before & kLocalTxOnTcp) sys::shutdown(tcp_fd_, SHUT_WR);
    tx_->flags.fetch_or(kProducerClosed, std::memory_order_seq_cst);
    tx_->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
    if (IsClaimed()) {
      // The watcher first: it raises POLLRDHUP over there, and the sooner
      // it runs, the likelier a woken poller sees it with the POLLIN.
      WakePeerWatcher();
      doorbell_->RingPeer();
    }
  }
  UpdateHangup();
  return 0;
}

int ShmTransport::ReadableBytes() {
  if (Transport* next = MovedTo()) return next->ReadableBytes();
  int64_t n = consumer_->AvailableNow();
  if (n < 0) return 0;
  return static_cast<int>(std::min<int64_t>(n, INT_MAX));
}

bool ShmTransport::DropStaleWakeup() {
  // The wake-up that announced a move to TCP is stale unless TCP has data.
  if (PeerMovedToTcp()) FollowPeerToTcp();
  if (Transport* next = MovedTo()) return next->DropStaleWakeup();
  if (!IsClaimed()) return false;
  SideLock lock(&side_->recv_lock);
  if (revoked()) return false;
  if (side_->local_flags.load(std::memory_order_acquire) &
      (kLocalReset | kLocalShutRead | kLocalPeerGone)) {
    return false;
  }
  // Readable below SO_RCVLOWAT's mark counts as stale too (poll() would
  // not report it on kernel TCP).  0 unless the program set one.
  const int64_t above = side_->readable_above.load(std::memory_order_relaxed);
  const int64_t available = AvailableAgainst(above + 1);
  if (available > above || available < 0) return false;
  auto finished = [this] {
    return ((rx_->flags.load(std::memory_order_acquire) |
             tx_->flags.load(std::memory_order_acquire)) &
            (kProducerClosed | kReset)) != 0;
  };
  if (finished()) return false;
  LiftPeerWriterBlock();
  if (available == 0) [[likely]] {
    AfterConsume(true);
    return true;
  }
  // Bytes below the mark: drain the wake-ups that announced them, then
  // look again; bytes published after the drain ring us again (the reader
  // is armed and no wake-up is pending), and a mark reached meanwhile
  // keeps the descriptor readable.
  DrainOwnWakeups();
  if (consumer_->AvailableNow() > above || finished()) {
    SignalSelf();
    return false;
  }
  return true;
}

int ShmTransport::TakeError() {
  if (Transport* next = MovedTo()) return next->TakeError();
  if (int err = side_->pending_error.exchange(0, std::memory_order_relaxed)) return err;
  // The peer's reset, not yet reported by a call: SO_ERROR takes it, once,
  // as the kernel's sock_error() does.
  if (((rx_->flags.load(std::memory_order_acquire) |
        tx_->flags.load(std::memory_order_acquire)) & kReset) &&
      !(side_->local_flags.fetch_or(kLocalResetReported, std::memory_order_acq_rel) &
        kLocalResetReported)) {
    return ECONNRESET;
  }
  return 0;
}

void ShmTransport::BeforeFork() {
  // Held bytes go first: the child's sends must not overtake them, and
  // the hold's deadline is this process's watcher's.
  PublishHeld();
  side_->holders.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace vsocket::fifo
