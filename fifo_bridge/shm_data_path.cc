// ShmTransport's data path: the StreamSteps that vsocket/stream_io.h drives
// for send, recv, sendmsg and recvmsg -- one attempt on a ring, and the
// bounded waits (busy-poll first, then poll() on the wait socket and the
// liveness connection).  Runs on the calling application thread.
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
#include "fifo_bridge/shm_provider.h"
#include "fifo_bridge/shm_reasons.h"
#include "vsocket/iovec_util.h"
#include "vsocket/log.h"
#include "vsocket/signal_restart.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

namespace {

// StreamCall::transport_state of a receive: its busy-poll phase.  The
// spin begins (the consumer disarms) only once a look found the ring empty:
// a receive that finds data at once, as in a stream, touches neither the
// spinner count nor the peer-visible wake word.
enum SpinPhase : uint32_t {
  kNoSpin = 0,     // not busy-polling (non-blocking, no budget, or closed)
  kSpinOpen = 1,   // may busy-poll; not begun, still armed
  kSpinSpent = 2,  // BeginSpin done, budget spent by a wait that succeeded
};

}  // namespace

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
    call.transport_state = kSpinOpen;
  }
}

void ShmTransport::EndCall(StreamCall& call) {
  if (call.transport_state == kSpinSpent) channel_.EndSpin();
}

ssize_t ShmTransport::TrySend(StreamCall& call, const struct iovec* iov,
                              int iovcnt, size_t skip) {
  if (!channel_.attached() &&
      (lifecycle_.TakeDecline() ||
       lifecycle_.MaybeRevoke(false, ShmReason().claim_timeout))) {
    return kStreamMoved;
  }
  if (PeerMovedToTcp() && !(channel_.side()->local_flags.load(std::memory_order_acquire) &
                            kLocalTxOnTcp)) {
    lifecycle_.FollowPeerToTcp();
  }
  // Declared before the lock, so it runs after the unlock: the watcher
  // calls OnDeadline holding its own mutex, and may take the send lock.
  ShmChannel::LookScheduler looks(this);
  SideLock lock(&channel_.side()->send_lock);
  if (revoked()) return kStreamMoved;
  uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
  if (local & kLocalReset) return channel_.ResetOutcome(/*sending=*/true);
  if (local & kLocalShutWrite) return -EPIPE;
  if (local & kLocalTxOnTcp) return lifecycle_.SendOnTcp(iov, iovcnt, skip);
  if ((channel_.tx()->flags.load(std::memory_order_acquire) |
       channel_.rx()->flags.load(std::memory_order_acquire)) & kReset) {
    return channel_.ResetOutcome(/*sending=*/true);
  }
  // A peer whose process died without a close (SIGKILL): its kernel closed
  // the TCP socket for it, with an RST if it left our bytes unread
  // (CheckLiveness put ECONNRESET in pending_error: reported once, then
  // EPIPE), else with a FIN, which the case below answers as TCP does.
  if ((local & kLocalPeerGone) &&
      ((local & kLocalResetReported) ||
       channel_.side()->pending_error.load(std::memory_order_relaxed)))
    return channel_.ResetOutcome(/*sending=*/true);
  if ((channel_.tx()->flags.load(std::memory_order_acquire) & kConsumerClosed) ||
      (local & kLocalPeerGone)) {
    // As kernel TCP: the peer's close looks like its FIN until the peer's
    // kernel answers our next data with an RST, so that one send succeeds
    // (the bytes are dropped: nobody will read them) and later ones fail
    // with EPIPE.  (redis-benchmark, told "DENIED" and closed on, waited
    // forever when its first write failed.)  A zero-length send sends
    // nothing, so draws no RST.
    if (iovcnt == 0) return (local & kLocalSentToClosedPeer) ? -EPIPE : 0;
    uint32_t before = channel_.side()->local_flags.fetch_or(kLocalSentToClosedPeer,
                                                  std::memory_order_acq_rel);
    if (before & kLocalSentToClosedPeer) return -EPIPE;
    channel_.UpdateHangup();  // POLLHUP, as the kernel shows once that RST is in
    return static_cast<ssize_t>(IovTotal(iov, static_cast<size_t>(iovcnt)) - skip);
  }
  if (iovcnt == 0) return 0;  // a zero-length send: nothing to report
  channel_.producer()->set_window(channel_.SendWindow());
  // Once the whole ring has been touched (after the first pass) nothing is
  // left to populate: no walk of the iovec on the hot path.
  if (!channel_.RingPopulated())
    channel_.PopulateAhead(IovTotal(iov, static_cast<size_t>(iovcnt)) - skip);
  // TCP_CORK or MSG_MORE: the bytes are held (shm_cork.cc).  A send
  // without either publishes what was held with its own bytes.
  bool hold = call.more || channel_.side()->corked.load(std::memory_order_relaxed);
  uint64_t held_before = hold ? channel_.producer()->Held() : 0;
  // Published in pieces of a quarter ring, each with its wake-up, so that
  // the reader copies one piece out while this thread copies the next in:
  // a 1 MiB write into an empty 1 MiB ring made them take turns. Held
  // bytes go in one piece (nobody reads them yet).
  const uint64_t piece = hold ? UINT64_MAX : channel_.producer()->capacity() / 4;
  int64_t n = 0;
  for (;;) {
    int64_t w = channel_.producer()->Write(iov, iovcnt, skip + static_cast<size_t>(n),
                                           hold, piece);
    if (w == kCorrupt) {
      channel_.ResetConnection("peer published an impossible consumer index");
      return channel_.ResetOutcome(/*sending=*/true);
    }
    // A bad pointer: its piece is not published; earlier pieces were.
    if (w == kUserFault) {
      if (n == 0) return -EFAULT;
      break;
    }
    if (w <= 0) break;
    n += w;
    if (!hold) [[likely]] channel_.NotifyReader();
    if (static_cast<uint64_t>(w) < piece) break;  // all of it, or the ring is full
  }
  if (n > 0) {
    if (hold) [[unlikely]] channel_.AfterHeldWrite(held_before, looks);
    StatsBytesSentSerialised(live_slot(), kShmKind, static_cast<uint64_t>(n));
    if (channel_.AfterRingWrite()) looks.ArmIdleLook();
  } else if (hold) [[unlikely]] {
    channel_.PublishHeldLocked();  // full: the wait for room must not wait on a hold
  }
  int64_t free_space = channel_.producer()->FreeSpace();
  StatsSendRingFill(live_slot(),
                    channel_.producer()->capacity() - static_cast<uint64_t>(free_space));
  if (channel_.attached() &&
      free_space < static_cast<int64_t>(channel_.BlockThreshold())) {
    channel_.BlockOurWrites();
  }
  return n > 0 ? n : -EAGAIN;
}

ssize_t ShmTransport::TryRecv(StreamCall& call, const struct iovec* iov,
                              int iovcnt, size_t skip, bool peek) {
  // An -EAGAIN of the call's first attempt goes back to the application
  // only in a non-blocking call.
  if (PeerMovedToTcp() && channel_.consumer()->Available() == 0) {
    // Everything the peer wrote to the ring has been read: TCP is next.
    lifecycle_.FollowPeerToTcp();
    if (revoked()) return kStreamMoved;
  }
  ssize_t r = ReadOnce(iov, iovcnt, skip, peek, call.nonblocking && skip == 0);
  // Its drain may have found the server's decline: on to TCP at once.
  if (r == -EAGAIN && lifecycle_.TakeDecline()) return kStreamMoved;
  if (r > 0 && !peek && PeerMovedToTcp() && channel_.consumer()->Available() == 0) {
    // That was the ring's last byte: move now, so that poll and epoll on
    // the user's number see TCP's readiness from here on.
    lifecycle_.FollowPeerToTcp();
  }
  if (r <= 0 && r != -EAGAIN && r != kStreamMoved) channel_.UpdateHangup();
  return r;
}

ssize_t ShmTransport::ReadOnce(const struct iovec* iov, int iovcnt, size_t skip,
                               bool peek, bool returning_to_user) {
  if (!channel_.attached() &&
      (lifecycle_.TakeDecline() ||
       lifecycle_.MaybeRevoke(false, ShmReason().claim_timeout))) {
    return kStreamMoved;
  }
  SideLock lock(&channel_.side()->recv_lock);
  if (revoked()) return kStreamMoved;
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
    if (local & kLocalReset) return channel_.ResetOutcome(/*sending=*/false);
    int64_t n = channel_.consumer()->Read(iov, iovcnt, skip, peek);
    if (n == kCorrupt) {
      channel_.ResetConnection("peer published an impossible producer index");
      return channel_.ResetOutcome(/*sending=*/false);
    }
    if (n == kUserFault) return -EFAULT;  // a bad pointer: nothing consumed
    // Pages lost during the copy (segment_fault_guard.h) read as zeros and
    // leave kPagesLost behind: those zeros are not data.  After the peer's
    // reset, what it sent before is (TCP delivers it before ECONNRESET).
    if (n > 0 && (channel_.rx()->flags.load(std::memory_order_acquire) & kPagesLost)) {
      return channel_.ResetOutcome(/*sending=*/false);
    }
    if (n > 0) {
      if (!peek) {
        StatsBytesReceivedSerialised(live_slot(), kShmKind, static_cast<uint64_t>(n));
        channel_.LiftPeerWriterBlock();
        channel_.AfterConsume(false);
      }
      return n;
    }
    // Empty.  The flags are published after the data (release), so a flag
    // seen here means any data before it is visible on the second pass.
    uint32_t peer_flags = channel_.rx()->flags.load(std::memory_order_acquire);
    uint32_t our_flags = channel_.tx()->flags.load(std::memory_order_acquire);
    if ((peer_flags | our_flags) & kReset) {
      // A call that has bytes already (MSG_WAITALL's later passes) ends
      // with them; the reset is the next call's, as in tcp_recvmsg.
      if (skip > 0) return 0;
      return channel_.ResetOutcome(/*sending=*/false);
    }
    // After shutdown(SHUT_RD), as Linux TCP: queued bytes (also those
    // that arrive later) are still read; only an empty ring reads as 0.
    if (local & kLocalShutRead) return 0;
    bool finished = (peer_flags & kProducerClosed) || (local & kLocalPeerGone);
    if (!finished) break;
    if (channel_.consumer()->Available() != 0) continue;
    if (peer_flags & kProducerClosed) return 0;
    int err = channel_.side()->pending_error.load(std::memory_order_relaxed);
    return err ? channel_.ResetOutcome(/*sending=*/false) : 0;
  }
  channel_.LiftPeerWriterBlock();
  if (returning_to_user) channel_.AfterConsume(true);
  return -EAGAIN;
}

int ShmTransport::WaitReadable(StreamCall& call) {
  // Bytes to wait for: 1, or a peek's SO_RCVLOWAT target, no more than the
  // mark the ring can reach (readable_above + 1, see RecvLowatChanged).
  int64_t want = 1;
  if (call.wait_bytes > 1) [[unlikely]] {
    want = static_cast<int64_t>(std::min<uint64_t>(
        call.wait_bytes,
        uint64_t{channel_.side()->readable_above.load(std::memory_order_relaxed)} + 1));
  }
  // Enough to read, or a corrupt index (the retry resets).
  auto enough = [this, want] {
    int64_t available = channel_.AvailableAgainst(want);
    return available >= want || available < 0;
  };
  if (call.transport_state == kSpinOpen) {
    // The call's first wait: disarm (a producer publishing in between
    // rings once, which AfterConsume drains), then spend the budget.
    channel_.BeginSpin();
    call.transport_state = kSpinSpent;
    bool ready = SpinUntil(
        [this, &enough] {
          return enough() ||
                 (channel_.rx()->flags.load(std::memory_order_relaxed) &
                  (kProducerClosed | kReset));
        },
        [this] {
          return revoked() || PeerMovedToTcp() ||
                 (channel_.side()->local_flags.load(std::memory_order_relaxed) &
                  kLocalPeerGone);
        },
        call.spin_ns);
    if (ready) return 0;
  }
  if (call.transport_state == kSpinSpent) {
    // Sleeping: be armed, so the peer's next publication wakes us.
    channel_.EndSpin();
    call.transport_state = kNoSpin;
  }
  // A user-space poller's hold would keep us unarmed too: end it, and keep
  // new ones away while we sleep.
  NoteKernelSleeper(true);
  struct SleeperCount {
    ShmTransport* t;
    ~SleeperCount() { t->NoteKernelSleeper(false); }
  } sleeper{this};
  int64_t deadline_ns = call.deadline_ns();
  SignalRestartWindow signals;
  for (;;) {
    if (revoked() || PeerMovedToTcp()) return 0;
    uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
    if (enough() ||
        (channel_.rx()->flags.load(std::memory_order_acquire) &
         (kProducerClosed | kReset)) ||
        (local & (kLocalPeerGone | kLocalReset | kLocalShutRead))) {
      return 0;
    }
    // Swallow stale wake-ups so that poll() really sleeps, then look again.
    if (channel_.DrainOwnWakeups().declined && lifecycle_.decline_seen())
      return 0;  // the retry moves
    if (enough() ||
        (channel_.rx()->flags.load(std::memory_order_acquire) &
         (kProducerClosed | kReset))) {
      return 0;
    }
    channel_.LiftPeerWriterBlock();
    int64_t wake_at = deadline_ns;
    bool unclaimed = !IsClaimed();
    int64_t claim_deadline = lifecycle_.claim_deadline_ns();
    if (unclaimed && (wake_at < 0 || wake_at > claim_deadline)) wake_at = claim_deadline;
    struct pollfd fds[2] = {{channel_.doorbell()->wait_fd(), POLLIN, 0},
                            {lifecycle_.tcp_fd(), POLLIN, 0}};
    int r = PollUntil(fds, 2, wake_at);
    if (r < 0) {
      if (errno == EINTR && signals.ShouldRestart(deadline_ns >= 0)) continue;
      return -errno;
    }
    if (fds[1].revents) lifecycle_.CheckLiveness();
    if (r == 0) {
      if (unclaimed && lifecycle_.MaybeRevoke(false, ShmReason().claim_timeout))
        return 0;
      if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns) return -EAGAIN;
    }
  }
}

int ShmTransport::WaitWritable(StreamCall& call) {
  int64_t deadline_ns = call.deadline_ns();
  SignalRestartWindow signals;
  if (channel_.side()->local_flags.load(std::memory_order_acquire) & kLocalTxOnTcp) {
    // Following the peer's move: our sends go to TCP.
    for (;;) {
      if (revoked()) return 0;
      struct pollfd pfd = {lifecycle_.tcp_fd(), POLLOUT, 0};
      int r = PollUntil(&pfd, 1, deadline_ns);
      if (r < 0) {
        if (errno == EINTR && signals.ShouldRestart(deadline_ns >= 0)) continue;
        return -errno;
      }
      if (r > 0) return 0;
      if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns) return -EAGAIN;
    }
  }
  if (SpinUntil([this] { return channel_.producer()->FreeSpace() != 0; },
                [this] { return revoked() || PeerMovedToTcp(); },
                call.spin_ns)) {
    return 0;
  }
  for (;;) {
    if (revoked() || PeerMovedToTcp()) return 0;
    if (channel_.producer()->FreeSpace() != 0) return 0;
    uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
    if ((local & (kLocalPeerGone | kLocalReset)) ||
        ((channel_.tx()->flags.load() | channel_.rx()->flags.load()) &
         (kReset | kConsumerClosed))) {
      return 0;  // the retry reports the error
    }
    bool unclaimed = !IsClaimed();
    int64_t wake_at = deadline_ns;
    struct pollfd fds[2] = {{channel_.doorbell()->wait_fd(), POLLOUT, 0},
                            {lifecycle_.tcp_fd(), POLLIN, 0}};
    int nfds = 2;
    // No filler before the claim, nor once the peer's socket refuses it
    // (it shut down reading; its reads go on): our wait socket stays
    // writable, so wake up now and then to look again.
    bool armed = !unclaimed && channel_.BlockOurWrites();
    if (!unclaimed && channel_.producer()->FreeSpace() != 0) return 0;
    if (!armed) {
      int64_t soon = MonotonicNs() + 1000000;
      if (wake_at < 0 || wake_at > soon) wake_at = soon;
      fds[0] = fds[1];
      nfds = 1;
    }
    int r = PollUntil(fds, nfds, wake_at);
    if (r < 0) {
      if (errno == EINTR && signals.ShouldRestart(deadline_ns >= 0)) continue;
      return -errno;
    }
    for (int k = 0; k < nfds; ++k) {
      if (fds[k].fd == lifecycle_.tcp_fd() && fds[k].revents) lifecycle_.CheckLiveness();
    }
    if (unclaimed && (lifecycle_.LookForDecline() ||
                      lifecycle_.MaybeRevoke(false, ShmReason().claim_timeout)))
      return 0;
    // The deadline holds whatever woke us (a wake-up that found no room,
    // the liveness connection).
    if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns)
      return channel_.producer()->FreeSpace() != 0 ? 0 : -EAGAIN;
  }
}

}  // namespace vsocket::fifo
