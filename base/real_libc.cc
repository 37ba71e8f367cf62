#include "base/real_libc.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>

namespace vsocket::sys {
#define VSOCKET_REAL(ret, name, params, args)              \
  ret name params {                                        \
    using Fn = ret(*) params;                              \
    static std::atomic<Fn> cache{nullptr};                 \
    return NextSymbol(&cache, #name) args;                       \
  }

VSOCKET_REAL(int, socket, (int domain, int type, int protocol),
             (domain, type, protocol))
VSOCKET_REAL(int, bind, (int fd, const struct sockaddr* addr, socklen_t len),
             (fd, addr, len))
VSOCKET_REAL(int, listen, (int fd, int backlog), (fd, backlog))
VSOCKET_REAL(int, accept4,
             (int fd, struct sockaddr* addr, socklen_t* len, int flags),
             (fd, addr, len, flags))
VSOCKET_REAL(int, connect, (int fd, const struct sockaddr* addr, socklen_t len),
             (fd, addr, len))
VSOCKET_REAL(ssize_t, send, (int fd, const void* buf, size_t len, int flags),
             (fd, buf, len, flags))
VSOCKET_REAL(ssize_t, recv, (int fd, void* buf, size_t len, int flags),
             (fd, buf, len, flags))
VSOCKET_REAL(ssize_t, sendto,
             (int fd, const void* buf, size_t len, int flags,
              const struct sockaddr* addr, socklen_t addrlen),
             (fd, buf, len, flags, addr, addrlen))
VSOCKET_REAL(ssize_t, recvfrom,
             (int fd, void* buf, size_t len, int flags, struct sockaddr* addr,
              socklen_t* addrlen),
             (fd, buf, len, flags, addr, addrlen))
VSOCKET_REAL(ssize_t, sendmsg, (int fd, const struct msghdr* msg, int flags),
             (fd, msg, flags))
VSOCKET_REAL(ssize_t, recvmsg, (int fd, struct msghdr* msg, int flags),
             (fd, msg, flags))
VSOCKET_REAL(int, recvmmsg,
             (int fd, struct mmsghdr* msgs, unsigned int vlen, int flags,
              struct timespec* timeout),
             (fd, msgs, vlen, flags, timeout))
VSOCKET_REAL(ssize_t, read, (int fd, void* buf, size_t len), (fd, buf, len))
VSOCKET_REAL(ssize_t, write, (int fd, const void* buf, size_t len),
             (fd, buf, len))
VSOCKET_REAL(ssize_t, readv, (int fd, const struct iovec* iov, int iovcnt),
             (fd, iov, iovcnt))
VSOCKET_REAL(ssize_t, writev, (int fd, const struct iovec* iov, int iovcnt),
             (fd, iov, iovcnt))
VSOCKET_REAL(int, close, (int fd), (fd))
VSOCKET_REAL(int, shutdown, (int fd, int how), (fd, how))
VSOCKET_REAL(int, setsockopt,
             (int fd, int level, int name, const void* val, socklen_t len),
             (fd, level, name, val, len))
VSOCKET_REAL(int, getsockopt,
             (int fd, int level, int name, void* val, socklen_t* len),
             (fd, level, name, val, len))
VSOCKET_REAL(int, getsockname,
             (int fd, struct sockaddr* addr, socklen_t* len), (fd, addr, len))
VSOCKET_REAL(int, getpeername,
             (int fd, struct sockaddr* addr, socklen_t* len), (fd, addr, len))
VSOCKET_REAL(int, poll, (struct pollfd* fds, nfds_t nfds, int timeout_ms),
             (fds, nfds, timeout_ms))
VSOCKET_REAL(int, epoll_wait,
             (int epfd, struct epoll_event* events, int maxevents, int timeout_ms),
             (epfd, events, maxevents, timeout_ms))
VSOCKET_REAL(int, dup3, (int oldfd, int newfd, int flags), (oldfd, newfd, flags))

int fcntl(int fd, int cmd, long arg) {
  using Fn = int (*)(int, int, ...);
  static std::atomic<Fn> cache{nullptr};
  return NextSymbol(&cache, "fcntl")(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, void* arg) {
  using Fn = int (*)(int, unsigned long, ...);
  static std::atomic<Fn> cache{nullptr};
  return NextSymbol(&cache, "ioctl")(fd, request, arg);
}

#undef VSOCKET_REAL

}  // namespace vsocket::sys
