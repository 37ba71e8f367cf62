#include "preload/real_calls.h"

#include <errno.h>

#include <atomic>

#include "base/real_libc.h"

namespace vsocket::preload::real {
#define VSP_REAL(ret, name, params, args)       \
  ret name params {                             \
    using Fn = ret(*) params;                   \
    static std::atomic<Fn> cache{nullptr};      \
    Fn fn = ::vsocket::sys::NextSymbol(&cache, #name);                \
    if (!fn) {                                  \
      errno = ENOSYS;                           \
      return static_cast<ret>(-1);              \
    }                                           \
    return fn args;                             \
  }

VSP_REAL(int, dup, (int fd), (fd))
VSP_REAL(int, dup2, (int oldfd, int newfd), (oldfd, newfd))
VSP_REAL(int, epoll_ctl, (int epfd, int op, int fd, struct epoll_event* event),
         (epfd, op, fd, event))
VSP_REAL(int, epoll_wait,
         (int epfd, struct epoll_event* events, int maxevents, int timeout),
         (epfd, events, maxevents, timeout))
VSP_REAL(int, epoll_pwait,
         (int epfd, struct epoll_event* events, int maxevents, int timeout,
          const sigset_t* sigmask),
         (epfd, events, maxevents, timeout, sigmask))
VSP_REAL(int, epoll_pwait2,
         (int epfd, struct epoll_event* events, int maxevents,
          const struct timespec* timeout, const sigset_t* sigmask),
         (epfd, events, maxevents, timeout, sigmask))
VSP_REAL(int, ppoll,
         (struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
          const sigset_t* sigmask),
         (fds, nfds, timeout, sigmask))
VSP_REAL(int, select,
         (int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
          struct timeval* timeout),
         (nfds, readfds, writefds, exceptfds, timeout))
VSP_REAL(int, pselect,
         (int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
          const struct timespec* timeout, const sigset_t* sigmask),
         (nfds, readfds, writefds, exceptfds, timeout, sigmask))
VSP_REAL(ssize_t, sendfile, (int out_fd, int in_fd, off_t* offset, size_t count),
         (out_fd, in_fd, offset, count))
VSP_REAL(ssize_t, splice,
         (int fd_in, off_t* off_in, int fd_out, off_t* off_out, size_t len,
          unsigned int flags),
         (fd_in, off_in, fd_out, off_out, len, flags))
VSP_REAL(int, sendmmsg,
         (int fd, struct mmsghdr* msgs, unsigned int vlen, int flags),
         (fd, msgs, vlen, flags))
VSP_REAL(ssize_t, preadv2,
         (int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags),
         (fd, iov, iovcnt, offset, flags))
VSP_REAL(ssize_t, pwritev2,
         (int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags),
         (fd, iov, iovcnt, offset, flags))
VSP_REAL(ssize_t, preadv64v2,
         (int fd, const struct iovec* iov, int iovcnt, off64_t offset, int flags),
         (fd, iov, iovcnt, offset, flags))
VSP_REAL(ssize_t, pwritev64v2,
         (int fd, const struct iovec* iov, int iovcnt, off64_t offset, int flags),
         (fd, iov, iovcnt, offset, flags))
VSP_REAL(int, close_range, (unsigned int first, unsigned int last, int flags),
         (first, last, flags))
VSP_REAL(int, fclose, (FILE* stream), (stream))
VSP_REAL(pid_t, fork, (void), ())

long syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  using Fn = long (*)(long, ...);
  static std::atomic<Fn> cache{nullptr};
  Fn fn = ::vsocket::sys::NextSymbol(&cache, "syscall");
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  return fn(number, a1, a2, a3, a4, a5, a6);
}

int clone(int (*fn)(void*), void* stack, int flags, void* arg, void* parent_tid,
          void* tls, void* child_tid) {
  using Fn = int (*)(int (*)(void*), void*, int, void*, ...);
  static std::atomic<Fn> cache{nullptr};
  Fn real = ::vsocket::sys::NextSymbol(&cache, "clone");
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  return real(fn, stack, flags, arg, parent_tid, tls, child_tid);
}
VSP_REAL(int, execve, (const char* path, char* const argv[], char* const envp[]),
         (path, argv, envp))
VSP_REAL(int, execvp, (const char* file, char* const argv[]), (file, argv))
VSP_REAL(int, execvpe,
         (const char* file, char* const argv[], char* const envp[]),
         (file, argv, envp))
VSP_REAL(int, fexecve, (int fd, char* const argv[], char* const envp[]),
         (fd, argv, envp))
VSP_REAL(int, execveat,
         (int dirfd, const char* path, char* const argv[], char* const envp[],
          int flags),
         (dirfd, path, argv, envp, flags))

#undef VSP_REAL

void closefrom(int lowfd) {
  using Fn = void (*)(int);
  static std::atomic<Fn> cache{nullptr};
  if (Fn fn = ::vsocket::sys::NextSymbol(&cache, "closefrom")) fn(lowfd);
}

// fdopen fails with a null FILE, not -1.
FILE* fdopen(int fd, const char* mode) {
  using Fn = FILE* (*)(int, const char*);
  static std::atomic<Fn> cache{nullptr};
  Fn fn = ::vsocket::sys::NextSymbol(&cache, "fdopen");
  if (!fn) {
    errno = ENOSYS;
    return nullptr;
  }
  return fn(fd, mode);
}

}  // namespace vsocket::preload::real
