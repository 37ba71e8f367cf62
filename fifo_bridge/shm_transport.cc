#include "fifo_bridge/shm_transport.h"
#include "fifo_bridge/shm_provider.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "base/real_libc.h"
#include "vsocket/descriptor_swap.h"
#include "vsocket/iovec_util.h"
#include "vsocket/log.h"
#include "vsocket/signal_restart.h"
#include "vsocket/tcp_transport.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

// StreamCall::transport_state of a receive: its busy-poll phase.
enum SpinPhase : uint32_t {
  kNoSpin = 0,     // not busy-polling (non-blocking, no budget, or closed)
  kSpinOpen = 1,   // BeginSpin done, budget not spent yet
  kSpinSpent = 2,  // BeginSpin done, budget spent by a wait that succeeded
};

}  // namespace

std::unique_ptr<ShmTransport> ShmTransport::Create(
    Role role, std::unique_ptr<ShmSegment> segment,
    std::unique_ptr<Doorbell> doorbell, int tcp_fd, int64_t claim_deadline_ns) {
  int side_fd = -1;
  SideState* side = CreateSideState(&side_fd);
  if (!side) return nullptr;
  bool client = role == Role::kClient;
  std::unique_ptr<ShmTransport> t =
      Assemble(role, std::move(segment), std::move(doorbell), side, side_fd,
               tcp_fd, claim_deadline_ns, /*claimed=*/!client);
  if (client) {
    // Watch from the start: before the claim, bytes or EOF on TCP mean the
    // listener was a plain program (CheckLiveness revokes the offer).
    WatchLiveness(tcp_fd, t.get());
    t->watched_ = true;
  }
  WatchSink(t->doorbell_->sink_fd(), t.get());
  return t;
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
  t->tx_ = segment->control(tx);
  t->rx_ = segment->control(rx);
  t->producer_ = std::make_unique<RingProducer>(t->tx_, segment->data(tx),
                                                capacity, &side->head);
  t->consumer_ = std::make_unique<RingConsumer>(t->rx_, segment->data(rx),
                                                capacity, &side->tail);
  t->block_threshold_ = capacity / 4;
  t->segment_ = std::move(segment);
  t->doorbell_ = std::move(doorbell);
  t->tcp_fd_ = tcp_fd;
  t->claim_deadline_ns_ = claim_deadline_ns;
  t->claimed_.store(claimed, std::memory_order_relaxed);
  return t;
}

ShmTransport::~ShmTransport() {
  if (side_) DestroySideState(side_, side_fd_);
}

uint32_t ShmTransport::capabilities() const {
  return ShmProvider()->capabilities();
}

bool ShmTransport::revoked() const {
  return side_->local_flags.load(std::memory_order_acquire) & kLocalRevoked;
}

bool ShmTransport::IsClaimed() {
  if (claimed_.load(std::memory_order_acquire)) return true;
  if (segment_->header()->claim.load(std::memory_order_seq_cst) == kClaimed) {
    claimed_.store(true, std::memory_order_release);
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

// ---- Wake-up protocol -------------------------------------------------------

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

void ShmTransport::NotifyReader() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t wake = tx_->reader_wake.load(std::memory_order_relaxed);
  if (!(wake & kReaderArmed) || (wake & kReaderPending)) return;
  if (!BeginRinging(tx_)) return;
  // Before the claim the server's wait socket does not exist; the server
  // looks at the ring when it claims (AfterClaim).
  if (IsClaimed()) doorbell_->RingPeer();
  EndRinging(tx_);
}

void ShmTransport::SignalSelf() {
  if (BeginRinging(rx_)) {
    doorbell_->RingSelf();
    EndRinging(rx_);
  }
}

void ShmTransport::AfterConsume(bool force_drain) {
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
  AwaitRingers(rx_);
  doorbell_->DrainWakeups();
  rx_->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
  if (consumer_->Available() != 0 ||
      (rx_->flags.load(std::memory_order_acquire) &
       (kProducerClosed | kReset))) {
    SignalSelf();
  }
}

void ShmTransport::LiftPeerWriterBlock() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!(rx_->writer_wake.load(std::memory_order_relaxed) & kWriterBlocked))
    return;
  int64_t available = consumer_->Available();
  if (available < 0 ||
      consumer_->capacity() - static_cast<uint64_t>(available) <
          block_threshold_) {
    return;
  }
  if (rx_->writer_wake.fetch_and(~kWriterBlocked, std::memory_order_seq_cst) &
      kWriterBlocked) {
    doorbell_->DrainSink();
  }
}

void ShmTransport::BlockOurWrites() {
  if (tx_->writer_wake.load(std::memory_order_acquire) & kWriterBlocked) return;
  if (doorbell_->FillSendBuffer() != 0) return;  // peer gone: writes fail
  tx_->writer_wake.fetch_or(kWriterBlocked, std::memory_order_seq_cst);
  int64_t free_bytes = producer_->FreeSpace();
  if (free_bytes >= static_cast<int64_t>(block_threshold_)) {
    // The consumer freed space concurrently and may have missed the flag:
    // ask its watcher thread to drain our filler.  (Waking its wait socket
    // instead would report POLLIN on a possibly empty ring.)
    doorbell_->WakePeerWatcher();
  }
}

void ShmTransport::UpdateHangup() {
  uint32_t local = side_->local_flags.load(std::memory_order_acquire);
  if ((local & (kLocalHangupShown | kLocalRevoked)) || !IsClaimed()) return;
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
  bool write_closed = local & kLocalShutWrite;
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

void ShmTransport::BeginSpin() {
  local_spinners_.fetch_add(1, std::memory_order_relaxed);
  if (side_->spinners.fetch_add(1, std::memory_order_seq_cst) == 0)
    rx_->reader_wake.fetch_and(~kReaderArmed, std::memory_order_seq_cst);
}

void ShmTransport::EndSpin() {
  local_spinners_.fetch_sub(1, std::memory_order_relaxed);
  if (side_->spinners.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  rx_->reader_wake.fetch_or(kReaderArmed, std::memory_order_seq_cst);
  if (consumer_->Available() != 0) SignalSelf();
}

void ShmTransport::ResetConnection(const char* why) {
  VSOCKET_LOG(kWarn, "shared-memory connection reset: %s", why);
  side_->local_flags.fetch_or(kLocalReset, std::memory_order_seq_cst);
  side_->pending_error.store(ECONNRESET, std::memory_order_relaxed);
  tx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
  rx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
  tx_->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
  if (IsClaimed()) {
    doorbell_->RingPeer();
    doorbell_->WakePeerWatcher();
  }
  doorbell_->RingSelf();
  UpdateHangup();
}

// ---- Liveness and the unclaimed offer ---------------------------------------

void ShmTransport::CheckLiveness() {
  if (side_->local_flags.load(std::memory_order_acquire) & kLocalPeerGone)
    return;
  char byte;
  ssize_t n = sys::recv(tcp_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n > 0) {
    if (!IsClaimed()) {
      MaybeRevoke(true, FallbackReason::kPeerSpokeTcp);
    } else {
      ResetConnection("bytes arrived on the TCP connection after the claim");
    }
    return;
  }
  // EOF or a socket error: the peer's process has gone (or closed).
  if (!IsClaimed()) {
    MaybeRevoke(true, FallbackReason::kPeerSpokeTcp);
    return;
  }
  // The peer's process closed its last descriptor without a vsocket close
  // (exit, _exit, a signal).  The kernel would have sent FIN, or RST when
  // the dying side left unread data: do the same.
  bool tcp_error = n < 0;
  uint32_t peer_flags = rx_->flags.load(std::memory_order_acquire);
  if (!(peer_flags & (kProducerClosed | kReset))) {
    int64_t free_bytes = producer_->FreeSpace();
    bool unread = free_bytes < 0 ||
                  static_cast<uint64_t>(free_bytes) < producer_->capacity();
    VSOCKET_LOG(kInfo, "peer of a shared-memory connection exited%s",
                unread || tcp_error ? " with unread data: reset" : "");
    if (unread || tcp_error)
      side_->pending_error.store(ECONNRESET, std::memory_order_relaxed);
  }
  side_->local_flags.fetch_or(kLocalPeerGone, std::memory_order_seq_cst);
  doorbell_->RingSelf();
  UpdateHangup();
}

void ShmTransport::RetireHere(FallbackReason reason) {
  std::lock_guard<std::mutex> lock(retire_mu_);
  if (successor()) return;
  // The user's descriptor number now names the TCP socket (the interposer
  // moves its epoll registrations along: vsocket/descriptor_swap.h).
  struct Swap {
    int tcp_fd;
    int user;
  } swap = {tcp_fd_, doorbell_->wait_fd()};
  ReplaceUserDescriptor(
      swap.user,
      [](void* arg) {
        auto* s = static_cast<Swap*>(arg);
        int fd_flags = sys::fcntl(s->user, F_GETFD);
        if (sys::dup3(s->tcp_fd, s->user,
                      (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
          VSOCKET_LOG(kError, "dup3 during fallback failed: errno %d", errno);
        }
      },
      &swap);
  doorbell_->set_wait_fd(-1);  // dup3 closed the wait socket
  // The TCP socket stays ours (tcp_fd_, closed by Release); the successor
  // names it by the user's number, which the socket layer owns.
  Retire(std::make_unique<TcpTransport>(swap.user, reason));
}

Transport* ShmTransport::MovedTo() {
  if (Transport* next = successor()) return next;
  if (!revoked()) return nullptr;
  // Another process holding the connection (fork) revoked it.
  FallbackReason reason = reason_.load(std::memory_order_acquire);
  RetireHere(reason != FallbackReason::kNone ? reason : FallbackReason::kOfferRevoked);
  return successor();
}

void ShmTransport::MoveUserFd(int fd) {
  if (Transport* next = MovedTo()) {
    next->MoveUserFd(fd);
    return;
  }
  set_user_fd(fd);
}

bool ShmTransport::OnLivenessEvent() {
  CheckLiveness();
  return !revoked() && !(side_->local_flags.load(std::memory_order_acquire) &
                         (kLocalPeerGone | kLocalReset));
}

bool ShmTransport::MaybeRevoke(bool force, FallbackReason reason) {
  if (role_ != Role::kClient || IsClaimed()) return revoked();
  if (!force && MonotonicNs() < claim_deadline_ns_) return revoked();
  SideLock send_lock(&side_->send_lock);
  SideLock recv_lock(&side_->recv_lock);
  if (revoked()) return true;
  uint32_t expected = kOffered;
  if (!segment_->header()->claim.compare_exchange_strong(
          expected, kRevoked, std::memory_order_seq_cst)) {
    if (expected == kClaimed) claimed_.store(true, std::memory_order_release);
    return revoked();
  }
  // Nobody consumed the ring: replay [0, head) into TCP, in order.
  uint64_t head = side_->head;
  uint8_t* data = segment_->data(Direction::kClientToServer);
  uint64_t sent = 0;
  int64_t give_up = MonotonicNs() + 10 * 1000000000ll;
  while (sent < head) {
    ssize_t n = sys::send(tcp_fd_, data + sent, head - sent,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        MonotonicNs() < give_up) {
      struct pollfd pfd = {tcp_fd_, POLLOUT, 0};
      sys::poll(&pfd, 1, 100);
      continue;
    }
    VSOCKET_LOG(kWarn, "could not replay %llu buffered bytes into TCP",
                static_cast<unsigned long long>(head - sent));
    break;
  }
  if (side_->local_flags.load() & kLocalShutWrite) sys::shutdown(tcp_fd_, SHUT_WR);
  RetireHere(reason);
  // The sink stays open until Release(): it is registered with the watcher,
  // and this may run on the watcher thread itself.
  segment_->Unlink();
  reason_.store(reason, std::memory_order_release);
  side_->local_flags.fetch_or(kLocalRevoked, std::memory_order_seq_cst);
  StatsConnectionMoved(kShmKind, TransportKind::kTcp);
  StatsFallback(reason, "the listener did not claim the shared-memory offer");
  return true;
}

// ---- Data path --------------------------------------------------------------

ssize_t ShmTransport::ResetOutcome(bool sending) {
  // Kernel TCP reports a reset once; afterwards sends fail with EPIPE and
  // receives see end-of-file.
  uint32_t before = side_->local_flags.fetch_or(kLocalResetReported,
                                                std::memory_order_acq_rel);
  if (!(before & kLocalResetReported)) {
    side_->pending_error.store(0, std::memory_order_relaxed);
    return -ECONNRESET;
  }
  return sending ? -EPIPE : 0;
}

ssize_t ShmTransport::SendMsg(const struct msghdr* msg, int flags,
                              const IoOptions& io) {
  return StreamSendMsg(*this, msg, flags, io);
}

ssize_t ShmTransport::RecvMsg(struct msghdr* msg, int flags,
                              const IoOptions& io) {
  return StreamRecvMsg(*this, msg, flags, io);
}

void ShmTransport::BeginCall(StreamCall& call) {
  if (!call.sending && !call.nonblocking && call.spin_ns > 0) {
    BeginSpin();
    call.transport_state = kSpinOpen;
  }
}

void ShmTransport::EndCall(StreamCall& call) {
  if (call.transport_state != kNoSpin) EndSpin();
}

ssize_t ShmTransport::TrySend(StreamCall&, const struct iovec* iov,
                              int iovcnt, size_t skip) {
  if (!claimed_.load(std::memory_order_relaxed) &&
      MaybeRevoke(false, FallbackReason::kClaimTimeout)) {
    return kStreamMoved;
  }
  SideLock lock(&side_->send_lock);
  if (revoked()) return kStreamMoved;
  uint32_t local = side_->local_flags.load(std::memory_order_acquire);
  if (local & kLocalReset) return ResetOutcome(/*sending=*/true);
  if (local & kLocalShutWrite) return -EPIPE;
  if ((tx_->flags.load(std::memory_order_acquire) |
       rx_->flags.load(std::memory_order_acquire)) & kReset) {
    return ResetOutcome(/*sending=*/true);
  }
  if (tx_->flags.load(std::memory_order_acquire) & kConsumerClosed) {
    // As kernel TCP: the peer's close looks like its FIN until the peer's
    // kernel answers our next data with an RST, so that one send succeeds
    // (the bytes are dropped: nobody will read them) and later ones fail
    // with EPIPE.  (redis-benchmark, told "DENIED" and closed on, waited
    // forever when its first write failed.)  A zero-length send sends
    // nothing, so draws no RST.
    if (iovcnt == 0) return (local & kLocalSentToClosedPeer) ? -EPIPE : 0;
    uint32_t before = side_->local_flags.fetch_or(kLocalSentToClosedPeer,
                                                  std::memory_order_acq_rel);
    if (before & kLocalSentToClosedPeer) return -EPIPE;
    return static_cast<ssize_t>(IovTotal(iov, static_cast<size_t>(iovcnt)) - skip);
  }
  if (local & kLocalPeerGone) return -EPIPE;
  if (iovcnt == 0) return 0;  // a zero-length send: nothing to report
  int64_t n = producer_->Write(iov, iovcnt, skip);
  if (n == kCorrupt) {
    ResetConnection("peer published an impossible consumer index");
    return ResetOutcome(/*sending=*/true);
  }
  if (n > 0) {
    NotifyReader();
    StatsBytesSent(kShmKind, static_cast<uint64_t>(n));
  }
  if (claimed_.load(std::memory_order_relaxed) &&
      producer_->FreeSpace() < static_cast<int64_t>(block_threshold_)) {
    BlockOurWrites();
  }
  return n > 0 ? n : -EAGAIN;
}

ssize_t ShmTransport::TryRecv(StreamCall& call, const struct iovec* iov,
                              int iovcnt, size_t skip, bool peek) {
  // An -EAGAIN of the call's first attempt goes back to the application
  // only in a non-blocking call.
  ssize_t r = ReadOnce(iov, iovcnt, skip, peek, call.nonblocking && skip == 0);
  if (r <= 0 && r != -EAGAIN && r != kStreamMoved) UpdateHangup();
  return r;
}

ssize_t ShmTransport::ReadOnce(const struct iovec* iov, int iovcnt, size_t skip,
                               bool peek, bool returning_to_user) {
  if (!claimed_.load(std::memory_order_relaxed) &&
      MaybeRevoke(false, FallbackReason::kClaimTimeout)) {
    return kStreamMoved;
  }
  SideLock lock(&side_->recv_lock);
  if (revoked()) return kStreamMoved;
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint32_t local = side_->local_flags.load(std::memory_order_acquire);
    if (local & kLocalReset) return ResetOutcome(/*sending=*/false);
    if (local & kLocalShutRead) return 0;
    int64_t n = consumer_->Read(iov, iovcnt, skip, peek);
    if (n == kCorrupt) {
      ResetConnection("peer published an impossible producer index");
      return ResetOutcome(/*sending=*/false);
    }
    if (n > 0) {
      if (!peek) {
        StatsBytesReceived(kShmKind, static_cast<uint64_t>(n));
        LiftPeerWriterBlock();
        AfterConsume(false);
      }
      return n;
    }
    // Empty.  The flags are published after the data (release), so a flag
    // seen here means any data before it is visible on the second pass.
    uint32_t peer_flags = rx_->flags.load(std::memory_order_acquire);
    uint32_t our_flags = tx_->flags.load(std::memory_order_acquire);
    if ((peer_flags | our_flags) & kReset) return ResetOutcome(/*sending=*/false);
    bool finished = (peer_flags & kProducerClosed) || (local & kLocalPeerGone);
    if (!finished) break;
    if (consumer_->Available() != 0) continue;
    if (peer_flags & kProducerClosed) return 0;
    int err = side_->pending_error.load(std::memory_order_relaxed);
    return err ? ResetOutcome(/*sending=*/false) : 0;
  }
  LiftPeerWriterBlock();
  if (returning_to_user) AfterConsume(true);
  return -EAGAIN;
}

int ShmTransport::WaitReadable(StreamCall& call) {
  if (call.transport_state == kSpinOpen) {
    // The call's first wait: spend the busy-poll budget.
    call.transport_state = kSpinSpent;
    bool ready = SpinUntil(
        [this] {
          return consumer_->Available() != 0 ||
                 (rx_->flags.load(std::memory_order_relaxed) &
                  (kProducerClosed | kReset));
        },
        [this] {
          return revoked() ||
                 (side_->local_flags.load(std::memory_order_relaxed) &
                  kLocalPeerGone);
        },
        call.spin_ns);
    if (ready) return 0;
  }
  if (call.transport_state != kNoSpin) {
    // Sleeping: be armed, so the peer's next publication wakes us.
    EndSpin();
    call.transport_state = kNoSpin;
  }
  int64_t deadline_ns = call.deadline_ns();
  SignalRestartWindow signals;
  for (;;) {
    if (revoked()) return 0;
    uint32_t local = side_->local_flags.load(std::memory_order_acquire);
    if (consumer_->Available() != 0 ||
        (rx_->flags.load(std::memory_order_acquire) &
         (kProducerClosed | kReset)) ||
        (local & (kLocalPeerGone | kLocalReset | kLocalShutRead))) {
      return 0;
    }
    // Swallow stale wake-ups so that poll() really sleeps, then look again.
    AwaitRingers(rx_);
    doorbell_->DrainWakeups();
    rx_->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
    if (consumer_->Available() != 0 ||
        (rx_->flags.load(std::memory_order_acquire) &
         (kProducerClosed | kReset))) {
      return 0;
    }
    LiftPeerWriterBlock();
    int64_t wake_at = deadline_ns;
    bool unclaimed = !IsClaimed();
    if (unclaimed && (wake_at < 0 || wake_at > claim_deadline_ns_))
      wake_at = claim_deadline_ns_;
    struct pollfd fds[2] = {{doorbell_->wait_fd(), POLLIN, 0},
                            {tcp_fd_, POLLIN, 0}};
    int r = PollUntil(fds, 2, wake_at);
    if (r < 0) {
      if (errno == EINTR && signals.ShouldRestart(deadline_ns >= 0)) continue;
      return -errno;
    }
    if (fds[1].revents) CheckLiveness();
    if (r == 0) {
      if (unclaimed && MaybeRevoke(false, FallbackReason::kClaimTimeout))
        return 0;
      if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns) return -EAGAIN;
    }
  }
}

int ShmTransport::WaitWritable(StreamCall& call) {
  if (SpinUntil([this] { return producer_->FreeSpace() != 0; },
                [this] { return revoked(); }, call.spin_ns)) {
    return 0;
  }
  int64_t deadline_ns = call.deadline_ns();
  SignalRestartWindow signals;
  for (;;) {
    if (revoked()) return 0;
    if (producer_->FreeSpace() != 0) return 0;
    uint32_t local = side_->local_flags.load(std::memory_order_acquire);
    if ((local & (kLocalPeerGone | kLocalReset)) ||
        ((tx_->flags.load() | rx_->flags.load()) & (kReset | kConsumerClosed))) {
      return 0;  // the retry reports the error
    }
    bool unclaimed = !IsClaimed();
    int64_t wake_at = deadline_ns;
    struct pollfd fds[2] = {{doorbell_->wait_fd(), POLLOUT, 0},
                            {tcp_fd_, POLLIN, 0}};
    int nfds = 2;
    if (unclaimed) {
      // No filler before the claim: wake up now and then to look again.
      int64_t soon = MonotonicNs() + 1000000;
      if (wake_at < 0 || wake_at > soon) wake_at = soon;
      fds[0] = fds[1];
      nfds = 1;
    } else {
      BlockOurWrites();
      if (producer_->FreeSpace() != 0) return 0;
    }
    int r = PollUntil(fds, nfds, wake_at);
    if (r < 0) {
      if (errno == EINTR && signals.ShouldRestart(deadline_ns >= 0)) continue;
      return -errno;
    }
    for (int k = 0; k < nfds; ++k) {
      if (fds[k].fd == tcp_fd_ && fds[k].revents) CheckLiveness();
    }
    if (unclaimed && MaybeRevoke(false, FallbackReason::kClaimTimeout)) return 0;
    if (r == 0 && deadline_ns >= 0 && MonotonicNs() >= deadline_ns)
      return -EAGAIN;
  }
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
    side_->local_flags.fetch_or(kLocalShutWrite, std::memory_order_seq_cst);
    tx_->flags.fetch_or(kProducerClosed, std::memory_order_seq_cst);
    tx_->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
    if (IsClaimed()) {
      doorbell_->RingPeer();
      doorbell_->WakePeerWatcher();  // it raises POLLRDHUP over there
    }
  }
  UpdateHangup();
  return 0;
}

int ShmTransport::ReadableBytes() {
  if (Transport* next = MovedTo()) return next->ReadableBytes();
  int64_t n = consumer_->Available();
  if (n < 0) return 0;
  return static_cast<int>(std::min<int64_t>(n, INT_MAX));
}

bool ShmTransport::DropStaleWakeup() {
  if (revoked() || !IsClaimed()) return false;
  SideLock lock(&side_->recv_lock);
  if (revoked()) return false;
  if (side_->local_flags.load(std::memory_order_acquire) &
      (kLocalReset | kLocalShutRead | kLocalPeerGone)) {
    return false;
  }
  if (consumer_->Available() != 0) return false;
  if ((rx_->flags.load(std::memory_order_acquire) |
       tx_->flags.load(std::memory_order_acquire)) &
      (kProducerClosed | kReset)) {
    return false;
  }
  LiftPeerWriterBlock();
  AfterConsume(true);
  return true;
}

int ShmTransport::TakeError() {
  if (Transport* next = MovedTo()) return next->TakeError();
  return side_->pending_error.exchange(0, std::memory_order_relaxed);
}

void ShmTransport::BeforeFork() {
  side_->holders.fetch_add(1, std::memory_order_relaxed);
}

void ShmTransport::Release() {
  bool last = side_->holders.fetch_sub(1, std::memory_order_acq_rel) == 1;
  if (last && !revoked()) {
    if (role_ == Role::kClient && !IsClaimed()) {
      // Data written before close must still arrive: hand it to TCP.
      MaybeRevoke(true, FallbackReason::kOfferRevoked);
    }
    if (!revoked()) {
      SideLock send_lock(&side_->send_lock);
      bool unread = consumer_->Available() != 0;
      if (unread) {
        // Closing with unread data aborts the connection, as TCP sends RST.
        tx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
        rx_->flags.fetch_or(kReset, std::memory_order_seq_cst);
      } else {
        tx_->flags.fetch_or(kProducerClosed, std::memory_order_seq_cst);
        rx_->flags.fetch_or(kConsumerClosed, std::memory_order_seq_cst);
      }
      tx_->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
      doorbell_->RingPeer();
      doorbell_->WakePeerWatcher();
    }
  }
  if (last) segment_->Unlink();
  if (watched_) UnwatchLiveness(tcp_fd_);
  watched_ = false;
  if (doorbell_->sink_fd() >= 0) UnwatchLiveness(doorbell_->sink_fd());
  // The user's descriptor is closed by the socket layer, not here.
  if (!revoked()) doorbell_->set_wait_fd(-1);
  doorbell_->Close();
  if (tcp_fd_ >= 0) sys::close(tcp_fd_);
  tcp_fd_ = -1;
  segment_.reset();
}

}  // namespace vsocket::fifo
