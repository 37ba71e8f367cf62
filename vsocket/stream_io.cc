#include "vsocket/stream_io.h"

#include <errno.h>
#include <signal.h>

#include <vector>

#include "vsocket/iovec_util.h"

namespace vsocket::stream_io_internal {

ssize_t Fail(int err) {
  errno = err;
  return -1;
}

ssize_t FinishSend(StreamSteps& steps, ssize_t r, size_t sent,
                   const struct msghdr* msg, int flags, const IoOptions& io) {
  if (r == kStreamMoved) {
    // The rest goes to the successor, with the caller's flags (it applies
    // the same rules: it is kernel TCP).
    Transport* next = steps.MovedTo();
    if (!next) return sent > 0 ? static_cast<ssize_t>(sent) : Fail(ENOTCONN);
    if (sent == 0) return next->SendMsg(msg, flags, io);
    std::vector<struct iovec> rest = IovSuffix(msg->msg_iov, msg->msg_iovlen, sent);
    struct msghdr tail = {};
    tail.msg_iov = rest.data();
    tail.msg_iovlen = rest.size();
    ssize_t n = next->SendMsg(&tail, flags, io);
    return static_cast<ssize_t>(sent) + (n > 0 ? n : 0);
  }
  if (r == -EPIPE && !(flags & MSG_NOSIGNAL)) ::raise(SIGPIPE);
  return Fail(static_cast<int>(-r));
}

ssize_t FinishRecvElsewhere(StreamSteps& steps, ssize_t r, struct msghdr* msg,
                            int flags, const IoOptions& io) {
  if (r != kStreamMoved) return Fail(static_cast<int>(-r));
  Transport* next = steps.MovedTo();
  if (!next) return Fail(ENOTCONN);
  return next->RecvMsg(msg, flags, io);
}

}  // namespace vsocket::stream_io_internal
