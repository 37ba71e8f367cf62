// Moving a claimed shared-memory connection onto its kernel TCP connection
// (docs/PROTOCOL.md, "Moving to TCP"): before an exec into an image that is
// not preloaded, before stdio gets the descriptor, or to give descriptors
// back.  The TCP connection opened first has carried no byte since the
// claim, so it can carry the rest of the stream if both sides agree where
// the rings stop:
//  - the initiator, holding both its side locks, CASes the claim word from
//    kClaimed to kMovedBy<role>.  From then on it neither produces into its
//    tx ring nor consumes from its rx ring; it puts the TCP socket at the
//    user's number and retires at once.
//  - the peer, on seeing the word (its watcher is woken; its calls look
//    too), resends over TCP the bytes of its tx ring the initiator had not
//    consumed, [tail, head), then sends everything else there.  It reads
//    its rx ring to the end (all the initiator will ever write to it) and
//    then retires too, so its reads continue on TCP in order.
// Each direction's bytes thus arrive once, in order: ring first, then TCP.
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/real_libc.h"
#include "fifo_bridge/shm_lifecycle.h"
#include "fifo_bridge/shm_transport.h"
#include "vsocket/iovec_util.h"
#include "vsocket/log.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

namespace {

// How long a resend waits for a peer that reads nothing before the stream
// ends in a reset (the caller blocks meanwhile, whatever its O_NONBLOCK).
constexpr int64_t kResendGiveUpNs = 10 * 1000000000ll;

}  // namespace

uint64_t ShmLifecycle::SendRingBytesToTcp(const uint8_t* data, uint64_t from,
                                          uint64_t to) {
  uint64_t capacity = channel_.segment()->capacity();
  uint64_t at = from;
  int64_t give_up = MonotonicNs() + kResendGiveUpNs;
  while (at < to) {
    uint64_t offset = at & (capacity - 1);
    size_t chunk = static_cast<size_t>(std::min(to - at, capacity - offset));
    ssize_t n = sys::send(tcp_fd_, data + offset, chunk,
                          MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      at += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        MonotonicNs() < give_up) {
      struct pollfd pfd = {tcp_fd_, POLLOUT, 0};
      sys::poll(&pfd, 1, 100);
      continue;
    }
    int err = n < 0 ? errno : 0;
    if (err == ECONNRESET || err == EPIPE) {
      // The TCP connection is gone: nobody could read these bytes, on TCP
      // either.  A reset this send took from the kernel is the program's
      // to see (the successor reports it), never an end of stream.
      if (err == ECONNRESET)
        channel_.side()->pending_error.store(ECONNRESET, std::memory_order_relaxed);
      VSOCKET_LOG(kInfo, "%llu ring bytes not resent: the TCP connection was reset",
                  static_cast<unsigned long long>(to - at));
      break;
    }
    // The peer took nothing for kResendGiveUpNs (or the socket failed):
    // the stream cannot go on without a hole, so it ends in a reset both
    // programs see (tcp_disconnect sends RST and leaves ECONNRESET here).
    VSOCKET_LOG(kWarn, "could not resend %llu ring bytes into TCP (%s): connection reset",
                static_cast<unsigned long long>(to - at),
                err ? strerror(err) : "no progress");
    struct sockaddr unspec = {};
    unspec.sa_family = AF_UNSPEC;
    sys::connect(tcp_fd_, &unspec, sizeof(unspec));
    break;
  }
  return at - from;
}

bool ShmLifecycle::MoveToKernelTcp(FallbackReason reason) {
  if (transport_.successor()) return true;
  if (!IsClaimed()) {
    // An unclaimed client offer moves the way a timeout moves it (nothing
    // was consumed: the whole ring is replayed).
    return channel_.role() == ShmRole::kClient && MaybeRevoke(true, reason);
  }
  if (PeerMovedToTcp()) {
    // The peer was first: follow it.  Done only if nothing it wrote is
    // still unread here (our caller cannot deliver the rest).
    FollowPeerToTcp();
    return revoked();
  }
  {
    SideLock send_lock(&channel_.side()->send_lock);
    SideLock recv_lock(&channel_.side()->recv_lock);
    if (revoked()) {
      MovedTo();
      return true;
    }
    uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
    if ((local & (kLocalReset | kLocalPeerGone)) ||
        ((channel_.tx()->flags.load(std::memory_order_acquire) |
          channel_.rx()->flags.load(std::memory_order_acquire)) & kReset)) {
      return false;  // nothing to move: the connection is over
    }
    // Held bytes are published first: the peer reads the ring to its
    // published end, then TCP.
    channel_.PublishHeldLocked();
    uint32_t expected = kClaimed;
    if (!channel_.segment()->header()->claim.compare_exchange_strong(
            expected, ClaimMovedBy(channel_.role()), std::memory_order_seq_cst)) {
      if (!PeerMovedToTcp()) return false;
      // The peer moved between our look and the CAS: follow it (below).
    } else {
      // Past this point our rings are stopped, and TCP bytes are data,
      // not a protocol error (CheckLiveness).  A peer that closed its last
      // descriptor (not just shut down writing) after writing bytes we have
      // not read may be gone and unable to resend them: report that
      // instead of losing them silently.  (Its Release looks at the claim
      // word after closing, so one of us sees the other.)
      if ((channel_.tx()->flags.load(std::memory_order_seq_cst) & kConsumerClosed) &&
          channel_.consumer()->Available() != 0) {
        channel_.ResetConnection("moved to TCP after the peer closed with unread data");
        return false;
      }
      // Other holders of our side (forked processes) follow from here on.
      channel_.side()->moved_reason.store(static_cast<uint32_t>(reason),
                                std::memory_order_relaxed);
      channel_.side()->local_flags.fetch_or(kLocalRevoked, std::memory_order_seq_cst);
      if (local & kLocalShutWrite) sys::shutdown(tcp_fd_, SHUT_WR);
      // The peer may be blocked on a full ring: lift its block and wake it
      // and its watcher, which sees the claim word and follows.
      channel_.LiftPeerWriterBlock();
      channel_.tx()->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
      channel_.doorbell()->RingPeer();
      channel_.WakePeerWatcher();
      channel_.segment()->Unlink();
      reason_.store(reason, std::memory_order_release);
      CountMove(RetireHere(reason), reason,
                "a connected shared-memory stream moved to TCP");
      return true;
    }
  }
  FollowPeerToTcp();
  return revoked();
}

void ShmLifecycle::FollowPeerToTcp() {
  SideLock send_lock(&channel_.side()->send_lock);
  SideLock recv_lock(&channel_.side()->recv_lock);
  if (revoked()) {
    MovedTo();
    return;
  }
  uint32_t local = channel_.side()->local_flags.load(std::memory_order_acquire);
  if (!(local & kLocalTxOnTcp)) {
    // The peer stopped consuming at the tail it published last: the bytes
    // from there to our head (held ones included) never reached it.
    channel_.producer()->Publish();  // nothing held is left behind
    uint64_t head = channel_.side()->head;
    uint64_t tail = channel_.tx()->tail.load(std::memory_order_acquire);
    if (tail > head || head - tail > channel_.segment()->capacity()) {
      channel_.ResetConnection("peer published an impossible consumer index");
      return;
    }
    Direction tx = channel_.role() == ShmRole::kClient ? Direction::kClientToServer
                                          : Direction::kServerToClient;
    SendRingBytesToTcp(channel_.segment()->data(tx), tail, head);
    if (local & kLocalShutWrite) sys::shutdown(tcp_fd_, SHUT_WR);
    channel_.side()->local_flags.fetch_or(kLocalTxOnTcp, std::memory_order_seq_cst);
    channel_.segment()->Unlink();
  }
  if (channel_.consumer()->Available() != 0) {
    // The application reads the rest of the ring first; the read that
    // empties it comes back here.
    channel_.SignalSelf();
    return;
  }
  channel_.side()->moved_reason.store(static_cast<uint32_t>(FallbackReason::kPeerMovedToTcp),
                            std::memory_order_relaxed);
  channel_.side()->local_flags.fetch_or(kLocalRevoked, std::memory_order_seq_cst);
  reason_.store(FallbackReason::kPeerMovedToTcp, std::memory_order_release);
  CountMove(RetireHere(FallbackReason::kPeerMovedToTcp),
            FallbackReason::kPeerMovedToTcp,
            "the peer moved a shared-memory stream to TCP");
}

ssize_t ShmLifecycle::SendOnTcp(const struct iovec* iov, int iovcnt,
                                size_t skip) {
  struct msghdr msg = {};
  std::vector<struct iovec> rest;  // only once the call moved some bytes
  if (skip == 0) {
    msg.msg_iov = const_cast<struct iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
  } else {
    rest = IovSuffix(iov, static_cast<size_t>(iovcnt), skip);
    msg.msg_iov = rest.data();
    msg.msg_iovlen = rest.size();
  }
  if (msg.msg_iovlen == 0) return 0;
  ssize_t sent = sys::sendmsg(tcp_fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  StatsBytesSent(transport_.live_slot(), TransportKind::kTcp, static_cast<uint64_t>(sent));
  return sent;
}

}  // namespace vsocket::fifo
