// ShmLifecycle's liveness and unclaimed-offer handling: the liveness TCP
// connection's EOF or bytes, and a client offer the server never claimed
// (timeout) or a listener that spoke TCP: the revoke, the replay of the
// ring into TCP, and the hand-over to a TcpTransport successor.
// Runs on application threads and on the liveness watcher thread.
#include "fifo_bridge/shm_lifecycle.h"
#include "fifo_bridge/shm_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "base/process_exited.h"
#include "base/real_libc.h"
#include "fifo_bridge/claim_progress.h"
#include "fifo_bridge/shm_reasons.h"
#include "vsocket/config.h"
#include "vsocket/descriptor_swap.h"
#include "vsocket/log.h"
#include "vsocket/stats.h"
#include "vsocket/tcp_transport.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

void ShmLifecycle::CheckLiveness() {
  // After a move to TCP its bytes are the stream's, not a protocol error.
  if (channel_.side()->local_flags.load(std::memory_order_acquire) &
      (kLocalPeerGone | kLocalRevoked))
    return;
  char byte;
  ssize_t n = sys::recv(tcp_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (WeMovedToTcp()) return;  // TCP carries the stream now
  // The look took the kernel's socket error (sock_error clears it): where
  // TCP is to carry the stream, the program must still see it (a reset is
  // not an end of stream), so it waits in pending_error for the successor.
  int tcp_errno = n < 0 ? errno : 0;
  if (PeerMovedToTcp()) {
    if (tcp_errno) channel_.side()->pending_error.store(tcp_errno, std::memory_order_relaxed);
    // TCP carries the stream now: its bytes and its end are data.
    FollowPeerToTcp();
    return;
  }
  if (n > 0) {
    if (!IsClaimed()) {
      MaybeRevoke(true, ShmReason().peer_spoke_tcp);
    } else {
      channel_.ResetConnection("bytes arrived on the TCP connection after the claim");
    }
    return;
  }
  // EOF or a socket error: the peer's process has gone (or closed).
  if (!IsClaimed()) {
    if (tcp_errno) channel_.side()->pending_error.store(tcp_errno, std::memory_order_relaxed);
    MaybeRevoke(true, ShmReason().peer_spoke_tcp);
    return;
  }
  // The peer's process closed its last descriptor without a vsocket close
  // (exit, _exit, a signal).  The kernel would have sent FIN, or RST when
  // the dying side left unread data: do the same.
  bool tcp_error = n < 0;
  uint32_t peer_flags = channel_.rx()->flags.load(std::memory_order_acquire);
  if (!(peer_flags & (kProducerClosed | kReset))) {
    int64_t free_bytes = channel_.producer()->FreeSpaceNow();
    bool unread = free_bytes < 0 ||
                  static_cast<uint64_t>(free_bytes) < channel_.producer()->capacity();
    VSOCKET_LOG(kInfo, "peer of a shared-memory connection exited%s",
                unread || tcp_error ? " with unread data: reset" : "");
    if (unread || tcp_error)
      channel_.side()->pending_error.store(ECONNRESET, std::memory_order_relaxed);
    // What it held back (TCP_CORK, MSG_MORE) is in our ring: delivered
    // before the end of stream, as kernel TCP sends a dead process's held
    // bytes.  Before kLocalPeerGone, which readers look at after the head.
    if (uint64_t held = channel_.consumer()->TakeHeld())
      VSOCKET_LOG(kDebug, "%llu bytes the dead peer held are delivered",
                  static_cast<unsigned long long>(held));
    // A pool's server: its owner may have died (our close then drops its
    // mapping; a peer that closed is left to the cache's sweeper).  Before
    // kLocalPeerGone: a reader that sees the end and closes finds the mark.
    channel_.segment()->NotePeerExited();
  }
  uint32_t local = channel_.side()->local_flags.fetch_or(kLocalPeerGone, std::memory_order_seq_cst);
  // A wait socket already shut for reading (the peer's close was shown)
  // stays readable and refuses the datagram (EPIPE): no wake-up to send.
  if (!(local & (kLocalReadHangupShown | kLocalHangupShown))) channel_.doorbell()->RingSelf();
  channel_.UpdateHangup();
}

bool ShmLifecycle::RetireHere(FallbackReason reason) {
  std::lock_guard<std::mutex> lock(retire_mu_);
  if (transport_.successor()) return false;
  // The user's descriptor number now names the TCP socket (the interposer
  // moves its epoll registrations along: vsocket/descriptor_swap.h).
  struct Swap {
    int tcp_fd;
    int user;
    const Doorbell* doorbell;
  } swap = {tcp_fd_, channel_.doorbell()->wait_fd(), channel_.doorbell()};
  // A thread asleep in poll()/select() holds the wait socket's file, not
  // the number, and would sleep on it until its own timeout (curl: 200 ms
  // before its first byte).  Wake it: its next look finds the TCP socket.
  // (A spurious POLLIN on a TCP socket; a non-blocking read says EAGAIN.)
  channel_.doorbell()->RingSelf();
  ReplaceUserDescriptor(
      swap.user,
      [](void* arg) {
        auto* s = static_cast<Swap*>(arg);
        // Only onto our own wait socket: the application may have closed
        // the number while another holder of the socket (a thread of
        // vsocket's moving it) kept it alive, and the kernel may have given
        // the number to a new socket since.  (A threaded server whose
        // spawns moved connections while it accepted others crashed so.)
        if (!s->doorbell->IsOurWaitSocket(s->user)) return;
        int fd_flags = sys::fcntl(s->user, F_GETFD);
        if (sys::dup3(s->tcp_fd, s->user,
                      (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
          VSOCKET_LOG(kError, "dup3 during fallback failed: errno %d", errno);
        }
      },
      &swap);
  // That look registers on nothing new: poll() and select() wait only on
  // the files of their first pass.  A sleeper that finds TCP not yet
  // readable sleeps on, on the old socket; OnLivenessEvent rings it again
  // when TCP becomes readable.
  // The TCP socket stays ours (tcp_fd_, closed by Release); the successor
  // names it by the user's number, which the socket layer owns.  It is
  // published before the doorbell lets go of the number: user_fd() reads
  // the doorbell until there is a successor, and another thread (accept()
  // registering this server end) may read it at any time: it must never
  // see -1 (tests/preload/spawn_race_test.cc).
  transport_.Retire(TcpTransport::AfterSwap(
      swap.user, reason, channel_.side()->pending_error.exchange(0, std::memory_order_relaxed)));
  channel_.doorbell()->set_wait_fd(-1);  // dup3 closed the wait socket
  return true;
}

void ShmLifecycle::CountMove(bool retired, FallbackReason reason,
                             const char* detail) {
  if (!retired) return;
  StatsConnectionMoved(kShmKind, TransportKind::kTcp);
  StatsFallback(reason, detail);
}

Transport* ShmLifecycle::MovedTo() {
  if (Transport* next = transport_.successor()) return next;
  if (!revoked()) return nullptr;
  // Another process holding the connection (fork) revoked or moved it.
  FallbackReason reason = reason_.load(std::memory_order_acquire);
  if (reason == FallbackReason::kNone) {
    reason = static_cast<FallbackReason>(
        channel_.side()->moved_reason.load(std::memory_order_relaxed));
  }
  if (reason == FallbackReason::kNone) reason = ShmReason().offer_revoked;
  bool retired = RetireHere(reason);
  // A move of a claimed connection made elsewhere counts in every process
  // that held it; a revoked offer counts once, in the process that revoked.
  if (channel_.side()->moved_reason.load(std::memory_order_relaxed) != 0)
    CountMove(retired, reason, "another holder moved the stream to TCP");
  return transport_.successor();
}

int64_t ShmLifecycle::NextUnclaimedLook(int64_t now_ns) const {
  return std::min(claim_deadline_ns_.load(std::memory_order_relaxed),
                  now_ns + kListenerLookNs);
}

bool ShmLifecycle::ClaimDeadlinePassed(int64_t now_ns) {
  int64_t deadline = claim_deadline_ns_.load(std::memory_order_relaxed);
  if (now_ns < deadline) return false;
  if (listener_pid_ <= 0) return true;
  int64_t by_progress = ClaimDeadlineByProgress(
      listener_pid_, offer_made_ns_, int64_t{GetConfig().claim_timeout_ms} * 1000000);
  if (now_ns >= by_progress) return true;
  // Racing threads may each move it: to the same time, or to a later one.
  claim_deadline_ns_.store(by_progress, std::memory_order_relaxed);
  return false;
}

int64_t ShmLifecycle::NextLookAfterDeadline() {
  if (channel_.role() == ShmRole::kClient && !IsClaimed()) {
    int64_t now = MonotonicNs();
    if (ClaimDeadlinePassed(now)) {
      MaybeRevoke(false, ShmReason().claim_timeout);
      return 0;
    }
    if (LookForDecline()) {
      // Nobody drained it: the application sleeps, in poll() for POLLOUT
      // say, or not on this descriptor at all.
      MaybeRevoke(true, DeclineReason());
      return 0;
    }
    if (listener_pid_ > 0 && sys::ProcessExited(listener_pid_)) {
      VSOCKET_LOG(kDebug, "the listener (pid %d) is gone before claiming: offer revoked",
                  static_cast<int>(listener_pid_));
      MaybeRevoke(true, ShmReason().offer_revoked);
      return 0;
    }
    return NextUnclaimedLook(now);
  }
  return channel_.TrimIdleRing();
}

bool ShmLifecycle::OnLivenessEvent() {
  if (!revoked()) CheckLiveness();
  if (revoked()) {
    // TCP, now on the user's number, became readable.  A poll()/select()
    // that began before the swap waits on the old wait socket alone (see
    // RetireHere): wake it, once, so that it looks at TCP.  Without this
    // it slept to its timeout with the echo in TCP (integration.
    // RendezvousSquat: 5 s in most runs; forever for an infinite poll).
    // Only sleepers on the old socket see it; the number names TCP.
    channel_.doorbell()->RingSelf();
    return false;
  }
  // After the peer's move, TCP readiness is data, which the application's
  // calls take: stop watching it.
  return !revoked() && !(channel_.side()->local_flags.load(std::memory_order_acquire) &
                         (kLocalPeerGone | kLocalReset | kLocalTxOnTcp));
}

bool ShmLifecycle::LookForDecline() {
  Doorbell::Drained drained = channel_.DrainOwnWakeups();
  if (drained.declined) return decline_seen_.load(std::memory_order_acquire);
  if (drained.datagrams > 0) channel_.SignalSelf();  // what was there stays readable
  return false;
}

bool ShmLifecycle::TakeDecline() {
  if (!decline_seen_.load(std::memory_order_acquire)) return false;
  return MaybeRevoke(true, DeclineReason());
}

FallbackReason ShmLifecycle::DeclineReason() const {
  return decline_for_uid_.load(std::memory_order_acquire) ? FallbackReason::kUidMismatch
                                                          : ShmReason().claim_declined;
}

bool ShmLifecycle::MaybeRevoke(bool force, FallbackReason reason) {
  if (channel_.role() != ShmRole::kClient || IsClaimed()) return revoked();
  if (!force && !ClaimDeadlinePassed(MonotonicNs())) return revoked();
  SideLock send_lock(&channel_.side()->send_lock);
  SideLock recv_lock(&channel_.side()->recv_lock);
  if (revoked()) return true;
  uint32_t expected = kOffered;
  if (!channel_.segment()->header()->claim.compare_exchange_strong(
          expected, kRevoked, std::memory_order_seq_cst)) {
    if (ClaimWasMade(expected)) {
      IsClaimed();  // notes the listener's progress
      return revoked();
    }
    // kRevoked by the server: it declined (its side could not be set up)
    // and consumed nothing; the replay below is ours to do (returning here
    // would leave the client waiting on its ring forever).
    if (expected != kRevoked) return revoked();
  }
  // Nobody consumed the ring: replay [0, head) into TCP, in order.  Its
  // bytes were counted as shared memory's when written; they are TCP's
  // (which carried them, or reset the connection under them).
  uint64_t head = channel_.side()->head;
  SendRingBytesToTcp(channel_.segment()->data(Direction::kClientToServer), 0, head);
  StatsBytesSentMoved(transport_.live_slot(), kShmKind, TransportKind::kTcp, head);
  if (channel_.side()->local_flags.load() & kLocalShutWrite) sys::shutdown(tcp_fd_, SHUT_WR);
  RetireHere(reason);
  channel_.segment()->Unlink();
  reason_.store(reason, std::memory_order_release);
  channel_.side()->local_flags.fetch_or(kLocalRevoked, std::memory_order_seq_cst);
  StatsConnectionMoved(kShmKind, TransportKind::kTcp);
  StatsFallback(reason, "the listener did not claim the shared-memory offer");
  return true;
}

}  // namespace vsocket::fifo
