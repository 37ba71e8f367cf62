#include "vsocket/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include "base/real_libc.h"
#include "vsocket/wait.h"

namespace vsocket {

ssize_t TcpTransport::SendMsg(const struct msghdr* msg, int flags,
                              const IoOptions&) {
  if (pending_error_.load(std::memory_order_relaxed) != 0) {
    if (int err = pending_error_.exchange(0)) {
      errno = err;
      return -1;
    }
  }
  ssize_t n = sys::sendmsg(fd_, msg, flags);
  if (n > 0) StatsBytesSent(live_slot(), TransportKind::kTcp, static_cast<uint64_t>(n));
  return n;
}

ssize_t TcpTransport::RecvMsg(struct msghdr* msg, int flags, const IoOptions&) {
  if (pending_error_.load(std::memory_order_relaxed) != 0) {
    // As tcp_recvmsg: bytes that arrived before the error are read first.
    ssize_t n = sys::recvmsg(fd_, msg, flags | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      if (n > 0 && !(flags & MSG_PEEK))
        StatsBytesReceived(live_slot(), TransportKind::kTcp, static_cast<uint64_t>(n));
      return n;
    }
    if (int err = pending_error_.exchange(0)) {
      errno = err;
      return -1;
    }
  }
  ssize_t n = sys::recvmsg(fd_, msg, flags);
  if (n > 0 && !(flags & MSG_PEEK))
    StatsBytesReceived(live_slot(), TransportKind::kTcp, static_cast<uint64_t>(n));
  return n;
}

int TcpTransport::Shutdown(int how) { return sys::shutdown(fd_, how); }

int TcpTransport::ReadableBytes() {
  int n = 0;
  if (sys::ioctl(fd_, FIONREAD, &n) != 0) return -1;
  return n;
}

std::unique_ptr<TcpTransport> TcpTransport::AfterSwap(int fd,
                                                     FallbackReason reason,
                                                     int pending_error) {
  auto t = std::make_unique<TcpTransport>(fd, reason);
  t->swapped_at_ns_ = MonotonicNs();
  t->pending_error_.store(pending_error, std::memory_order_relaxed);
  return t;
}

bool TcpTransport::DropStaleWakeup() {
  // The woken waiters report within moments of the swap; later reports
  // come from waits that looked at the TCP socket itself.
  constexpr int64_t kWakeWindowNs = 1000000000;
  if (swapped_at_ns_ == 0 || MonotonicNs() - swapped_at_ns_ > kWakeWindowNs)
    return false;
  struct pollfd pfd = {fd_, POLLIN, 0};
  return sys::poll(&pfd, 1, 0) == 0;
}

int TcpTransport::TakeError() {
  if (int pending = pending_error_.exchange(0)) return pending;
  int err = 0;
  socklen_t len = sizeof(err);
  if (sys::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

}  // namespace vsocket
