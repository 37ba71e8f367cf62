#include "vsocket/stream_io.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <cstring>
#include <vector>

#include "base/user_copy_guard.h"
#include "vsocket/iovec_util.h"

namespace vsocket::stream_io_internal {

ssize_t Fail(int err) {
  errno = err;
  return -1;
}

int CheckIovArray(const struct msghdr* msg, bool sending, uint64_t* total) {
  // As the kernel's copy_msghdr_from_user and import_iovec, reading the
  // caller's msghdr and array under the fault guard: a bad pointer is
  // EFAULT, not SIGSEGV.  A null msghdr is refused before it is read
  // (reading through it is undefined behaviour, not only a fault).
  if (msg == nullptr) return EFAULT;
  struct msghdr h;
  // The kernel copies the whole msghdr first.
  if (!GuardedUserCopy([&] { std::memcpy(&h, msg, sizeof h); })) return EFAULT;
  if (h.msg_name != nullptr && h.msg_namelen > static_cast<socklen_t>(INT_MAX))
    return EINVAL;
  if (sending && h.msg_name != nullptr && h.msg_namelen > 0) {
    // move_addr_to_kernel copies at most a sockaddr_storage.
    const size_t n = std::min<size_t>(h.msg_namelen, sizeof(struct sockaddr_storage));
    struct sockaddr_storage ignored;
    if (!GuardedUserCopy([&] { std::memcpy(&ignored, h.msg_name, n); })) return EFAULT;
  }
  int err = 0;
  bool readable = GuardedUserCopy([&] {
    const size_t n = h.msg_iovlen;
    const struct iovec* iov = h.msg_iov;
    if (n > UIO_MAXIOV) {
      err = EMSGSIZE;
      return;
    }
    if (n > 0 && iov == nullptr) {
      err = EFAULT;
      return;
    }
    constexpr uint64_t kMax = std::numeric_limits<ssize_t>::max();
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t len = iov[i].iov_len;
      if (len > kMax || sum + len > kMax) {
        err = EINVAL;
        return;
      }
      sum += len;
    }
    *total = sum;
  });
  return readable ? err : EFAULT;
}

int FastOpenError(const struct msghdr* msg) {
  // The address is read as tcp_sendmsg_fastopen and __inet_stream_connect
  // read it; CheckIovArray found the msghdr and the name readable.
  int err = EISCONN;
  GuardedUserCopy([&] {
    if (msg->msg_name == nullptr || msg->msg_namelen == 0) return;
    if (msg->msg_namelen < sizeof(sa_family_t)) {
      err = EINVAL;
    } else {
      sa_family_t family;  // msg_name may be unaligned
      std::memcpy(&family, msg->msg_name, sizeof family);
      if (family == AF_UNSPEC) err = EOPNOTSUPP;
    }
  });
  return err;
}

bool SetReceivedFields(struct msghdr* msg, int flags) {
  return GuardedUserCopy([&] {
    if (msg->msg_name) msg->msg_namelen = 0;
    msg->msg_controllen = 0;
    msg->msg_flags = flags & MSG_CMSG_CLOEXEC;
  });
}

ssize_t RecvIntoScratch(ssize_t (*recv)(void* steps, struct msghdr* msg,
                                        int flags, const IoOptions& io),
                        void* steps, struct msghdr* msg, uint64_t total,
                        int flags, const IoOptions& io) {
  const size_t size = static_cast<size_t>(std::min(total, kMaxTruncScratch));
  std::unique_ptr<char[]> scratch(new (std::nothrow) char[size]);
  if (!scratch) return Fail(ENOMEM);
  const bool wait_all = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
  uint64_t got = 0;
  ssize_t r;
  do {
    struct iovec iov = {scratch.get(),
                        static_cast<size_t>(std::min<uint64_t>(size, total - got))};
    struct msghdr part = {};
    part.msg_iov = &iov;
    part.msg_iovlen = 1;
    r = recv(steps, &part, flags, io);
    if (r > 0) got += static_cast<uint64_t>(r);
  } while (wait_all && r > 0 && got < total);
  if (got == 0 && r < 0) return -1;  // errno is the receive's
  if (!SetReceivedFields(msg, flags)) return Fail(EFAULT);
  return static_cast<ssize_t>(got);
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
