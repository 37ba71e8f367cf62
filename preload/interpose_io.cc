// read, readv, write, writev, recv, recvfrom, recvmsg, recvmmsg, send,
// sendto, sendmsg, sendmmsg, preadv2, pwritev2 (and their 64 names).
// preadv/pwritev need nothing: every descriptor vsocket gives out is a
// socket, on which the kernel answers them (ESPIPE, EINVAL) itself.
#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/user_copy_guard.h"
#include "preload/descriptor_passing.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "base/real_libc.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
namespace real = vsocket::preload::real;
using vsocket::preload::Ours;

namespace {

constexpr unsigned int kMaxMmsg = UIO_MAXIOV;  // the kernel's cap on vlen

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// recvmmsg() on a stream socket, as the kernel runs it: one recvmsg() per
// entry, each blocking unless MSG_DONTWAIT (or MSG_WAITFORONE after the
// first); the timeout is looked at after each entry.
int EmulatedRecvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen,
                     int flags, struct timespec* timeout) {
  int64_t deadline = -1;
  if (timeout) {
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
        timeout->tv_nsec >= 1000000000) {
      errno = EINVAL;
      return -1;
    }
    deadline = NowNs() + int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec;
  }
  if (vlen > kMaxMmsg) vlen = kMaxMmsg;
  bool wait_for_one = flags & MSG_WAITFORONE;
  flags &= ~MSG_WAITFORONE;
  unsigned int done = 0;
  int err = 0;
  while (done < vlen) {
    ssize_t n = vsocket_recvmsg(fd, &msgs[done].msg_hdr, flags);
    if (n < 0) {
      err = errno;
      break;
    }
    msgs[done].msg_len = static_cast<unsigned int>(n);
    ++done;
    if (wait_for_one) flags |= MSG_DONTWAIT;
    if (deadline >= 0 && NowNs() >= deadline) break;
  }
  if (timeout) {
    int64_t left = deadline - NowNs();
    if (left < 0) left = 0;
    timeout->tv_sec = left / 1000000000;
    timeout->tv_nsec = left % 1000000000;
  }
  if (done == 0) {
    errno = err;
    return -1;
  }
  return static_cast<int>(done);
}

int EmulatedSendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen,
                     int flags) {
  if (vlen > kMaxMmsg) vlen = kMaxMmsg;
  unsigned int done = 0;
  while (done < vlen) {
    ssize_t n = vsocket_sendmsg(fd, &msgs[done].msg_hdr, flags);
    if (n < 0) {
      if (done == 0) return -1;
      break;
    }
    msgs[done].msg_len = static_cast<unsigned int>(n);
    ++done;
  }
  return static_cast<int>(done);
}

}  // namespace

VSP_EXPORT ssize_t read(int fd, void* buf, size_t len) {
  if (!Ours(fd)) return sys::read(fd, buf, len);
  return vsocket_read(fd, buf, len);
}

VSP_EXPORT ssize_t write(int fd, const void* buf, size_t len) {
  if (!Ours(fd)) return sys::write(fd, buf, len);
  return vsocket_write(fd, buf, len);
}

VSP_EXPORT ssize_t readv(int fd, const struct iovec* iov, int iovcnt) {
  if (!Ours(fd)) return sys::readv(fd, iov, iovcnt);
  return vsocket_readv(fd, iov, iovcnt);
}

VSP_EXPORT ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  if (!Ours(fd)) return sys::writev(fd, iov, iovcnt);
  return vsocket_writev(fd, iov, iovcnt);
}

namespace {

// The RWF_ flags the kernel accepts on a socket (kiocb_set_rw_flags): all
// but RWF_NOWAIT change nothing there.  Others fail with EOPNOTSUPP.
constexpr int kSocketRwFlags =
    RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND | RWF_NOAPPEND;

// preadv2/pwritev2 on a virtual socket, as the kernel runs them on a
// socket: offset -1 is readv/writev (RWF_NOWAIT: MSG_DONTWAIT); any other
// offset is EINVAL if negative, else ESPIPE, before the array is looked
// at.  Returns -1 with errno, or the count.
ssize_t VectorIoOnSocket(bool write, int fd, const struct iovec* iov, int iovcnt,
                         int64_t offset, int flags) {
  if (offset != -1) {
    errno = offset < 0 ? EINVAL : ESPIPE;
    return -1;
  }
  if (iovcnt < 0 || iovcnt > UIO_MAXIOV) {  // import_iovec
    errno = EINVAL;
    return -1;
  }
  if (flags & ~kSocketRwFlags) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (!(flags & RWF_NOWAIT)) {
    return write ? vsocket_writev(fd, iov, iovcnt) : vsocket_readv(fd, iov, iovcnt);
  }
  struct msghdr msg = {};
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  return write ? vsocket_sendmsg(fd, &msg, MSG_DONTWAIT)
               : vsocket_recvmsg(fd, &msg, MSG_DONTWAIT);
}

}  // namespace

VSP_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt,
                           off_t offset, int flags) {
  if (!Ours(fd)) return real::preadv2(fd, iov, iovcnt, offset, flags);
  return VectorIoOnSocket(false, fd, iov, iovcnt, offset, flags);
}

VSP_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int iovcnt,
                              off64_t offset, int flags) {
  if (!Ours(fd)) return real::preadv64v2(fd, iov, iovcnt, offset, flags);
  return VectorIoOnSocket(false, fd, iov, iovcnt, offset, flags);
}

VSP_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int iovcnt,
                            off_t offset, int flags) {
  if (!Ours(fd)) return real::pwritev2(fd, iov, iovcnt, offset, flags);
  return VectorIoOnSocket(true, fd, iov, iovcnt, offset, flags);
}

VSP_EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int iovcnt,
                               off64_t offset, int flags) {
  if (!Ours(fd)) return real::pwritev64v2(fd, iov, iovcnt, offset, flags);
  return VectorIoOnSocket(true, fd, iov, iovcnt, offset, flags);
}

VSP_EXPORT ssize_t recv(int fd, void* buf, size_t len, int flags) {
  if (!Ours(fd)) return sys::recv(fd, buf, len, flags);
  return vsocket_recv(fd, buf, len, flags);
}

VSP_EXPORT ssize_t recvfrom(int fd, void* buf, size_t len, int flags,
                            struct sockaddr* addr, socklen_t* addrlen) {
  if (!Ours(fd)) return sys::recvfrom(fd, buf, len, flags, addr, addrlen);
  return vsocket_recvfrom(fd, buf, len, flags, addr, addrlen);
}

VSP_EXPORT ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  if (!Ours(fd)) {
    ssize_t n = sys::recvmsg(fd, msg, flags);
    if (n >= 0) vsocket::preload::AdoptReceivedListeners(msg);
    return n;
  }
  return vsocket_recvmsg(fd, msg, flags);
}

VSP_EXPORT int recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen,
                        int flags, struct timespec* timeout) {
  if (!Ours(fd)) {
    int n = sys::recvmmsg(fd, msgs, vlen, flags, timeout);
    for (int i = 0; i < n; ++i) vsocket::preload::AdoptReceivedListeners(&msgs[i].msg_hdr);
    return n;
  }
  return EmulatedRecvmmsg(fd, msgs, vlen, flags, timeout);
}

VSP_EXPORT ssize_t send(int fd, const void* buf, size_t len, int flags) {
  if (!Ours(fd)) return sys::send(fd, buf, len, flags);
  return vsocket_send(fd, buf, len, flags);
}

VSP_EXPORT ssize_t sendto(int fd, const void* buf, size_t len, int flags,
                          const struct sockaddr* addr, socklen_t addrlen) {
  if (!Ours(fd)) return sys::sendto(fd, buf, len, flags, addr, addrlen);
  return vsocket_sendto(fd, buf, len, flags, addr, addrlen);
}

VSP_EXPORT ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if (!Ours(fd)) {
    if (!vsocket::preload::MayPassVirtualSockets()) return sys::sendmsg(fd, msg, flags);
    vsocket::preload::PassedRights rights(msg);
    return sys::sendmsg(fd, rights.message(), flags);
  }
  return vsocket_sendmsg(fd, msg, flags);
}

// sendmmsg on a socket of the kernel's that may pass virtual sockets: each
// message as sendmsg would send it (descriptor_passing.h).
static int SendmmsgPassing(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags) {
  if (msgs == nullptr) return real::sendmmsg(fd, msgs, vlen, flags);
  vlen = std::min(vlen, static_cast<unsigned int>(UIO_MAXIOV));  // the kernel's cap
  // Datagram senders batch here: without control data there is nothing to
  // pass, and no message needs its own look (nor an allocation).
  bool control = false;
  vsocket::InstallUserCopyGuard();
  vsocket::GuardedUserCopy([&] {
    for (unsigned int i = 0; i < vlen && !control; ++i) control = msgs[i].msg_hdr.msg_controllen != 0;
  });
  if (!control) return real::sendmmsg(fd, msgs, vlen, flags);
  std::vector<std::unique_ptr<vsocket::preload::PassedRights>> rights;
  bool substituted = false;
  for (unsigned int i = 0; i < vlen; ++i) {
    rights.push_back(std::make_unique<vsocket::preload::PassedRights>(&msgs[i].msg_hdr));
    substituted |= rights.back()->message() != &msgs[i].msg_hdr;
  }
  if (!substituted) return real::sendmmsg(fd, msgs, vlen, flags);
  std::vector<struct mmsghdr> copy(vlen);
  if (!vsocket::GuardedUserCopy([&] { std::memcpy(copy.data(), msgs, vlen * sizeof(*msgs)); }))
    return real::sendmmsg(fd, msgs, vlen, flags);  // the kernel's EFAULT
  for (unsigned int i = 0; i < vlen; ++i) copy[i].msg_hdr = *rights[i]->message();
  int n = real::sendmmsg(fd, copy.data(), vlen, flags);
  for (int i = 0; i < n; ++i) msgs[i].msg_len = copy[i].msg_len;
  return n;
}

VSP_EXPORT int sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen,
                        int flags) {
  if (!Ours(fd)) {
    if (!vsocket::preload::MayPassVirtualSockets()) return real::sendmmsg(fd, msgs, vlen, flags);
    return SendmmsgPassing(fd, msgs, vlen, flags);
  }
  return EmulatedSendmmsg(fd, msgs, vlen, flags);
}
