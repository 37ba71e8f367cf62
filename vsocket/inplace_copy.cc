#include "vsocket/inplace_copy.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "vsocket/transport.h"

namespace vsocket {

ssize_t InPlaceCopy::View(Transport& t, const void** data, size_t max,
                          int flags, const IoOptions& io) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!view_.TryBegin()) {  // ours while we wait: a concurrent View() gets EBUSY
      errno = EBUSY;
      return -1;
    }
    if (!buf_) buf_.reset(new (std::nothrow) uint8_t[kMaxView]);
    if (!buf_) {
      view_.End();
      errno = ENOMEM;
      return -1;
    }
  }
  // Only the view's taker touches buf_, so the wait needs no lock.
  struct iovec iov = {buf_.get(), std::min(max, kMaxView)};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ssize_t n = t.RecvMsg(&msg, MSG_PEEK | (flags & MSG_DONTWAIT), io);
  int saved = errno;
  std::lock_guard<std::mutex> lock(mu_);
  if (n <= 0) {
    view_.End();  // end of stream or error: no view
    errno = saved;
    return n;
  }
  view_.Show(static_cast<size_t>(n));
  *data = buf_.get();
  return n;
}

int InPlaceCopy::Release(Transport& t, size_t n, const IoOptions& io) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!view_.CanRelease(n)) {
    errno = EINVAL;
    return -1;
  }
  size_t done = 0;
  while (done < n) {
    struct iovec iov = {buf_.get(), n - done};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    // The bytes were peeked, so they are queued: this never waits.
    ssize_t r = t.RecvMsg(&msg, MSG_TRUNC | MSG_DONTWAIT, io);
    if (r <= 0) {
      // The peeked bytes are gone: another receive call consumed them,
      // which the contract forbids.
      if (r == 0) errno = EINVAL;
      view_.End();
      return -1;
    }
    done += static_cast<size_t>(r);
  }
  view_.End();
  return 0;
}

}  // namespace vsocket
