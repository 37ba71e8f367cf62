// The libc socket functions vsocket itself calls.  When vsocket runs inside
// the LD_PRELOAD interposer, the plain names (socket, send, close, ...) are
// vsocket's own wrappers; calling them from inside vsocket would recurse.  So
// every socket-related libc call in fifo_bridge/ and vsocket/ goes through
// sys::, which resolves the next definition after this library
// (dlsym(RTLD_NEXT)) once, on first use.  Thread-safe; async-signal-safe once
// resolved.
#ifndef VSOCKET_BASE_REAL_LIBC_H_
#define VSOCKET_BASE_REAL_LIBC_H_

#include <dlfcn.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>

namespace vsocket::sys {

// The definition of `name` in the libraries after this one, resolved once
// and cached in *cache; nullptr if there is none.  dlsym may allocate but
// never calls a socket function, so this is safe inside an interposed call.
// Under ThreadSanitizer (VSOCKET_TSAN; never the interposer, which is built
// uninstrumented) the lookup starts at the global scope instead, so that
// vsocket's own open/close/dup reach TSan's interceptors: RTLD_NEXT skipped
// them, and TSan then saw a descriptor number reused by another thread
// without its close, and reported a race on it.
template <typename Fn>
Fn NextSymbol(std::atomic<Fn>* cache, const char* name) {
  Fn fn = cache->load(std::memory_order_acquire);
  if (!fn) {
#if defined(__SANITIZE_THREAD__)
    fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
#else
    fn = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
#endif
    if (fn) cache->store(fn, std::memory_order_release);
  }
  return fn;
}

int socket(int domain, int type, int protocol);
int bind(int fd, const struct sockaddr* addr, socklen_t len);
int listen(int fd, int backlog);
int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags);
int connect(int fd, const struct sockaddr* addr, socklen_t len);
ssize_t send(int fd, const void* buf, size_t len, int flags);
ssize_t recv(int fd, void* buf, size_t len, int flags);
ssize_t sendto(int fd, const void* buf, size_t len, int flags,
               const struct sockaddr* addr, socklen_t addrlen);
ssize_t recvfrom(int fd, void* buf, size_t len, int flags,
                 struct sockaddr* addr, socklen_t* addrlen);
ssize_t sendmsg(int fd, const struct msghdr* msg, int flags);
ssize_t recvmsg(int fd, struct msghdr* msg, int flags);
int recvmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags,
             struct timespec* timeout);
ssize_t read(int fd, void* buf, size_t len);
ssize_t write(int fd, const void* buf, size_t len);
ssize_t readv(int fd, const struct iovec* iov, int iovcnt);
ssize_t writev(int fd, const struct iovec* iov, int iovcnt);
int close(int fd);
int shutdown(int fd, int how);
int setsockopt(int fd, int level, int name, const void* val, socklen_t len);
int getsockopt(int fd, int level, int name, void* val, socklen_t* len);
int getsockname(int fd, struct sockaddr* addr, socklen_t* len);
int getpeername(int fd, struct sockaddr* addr, socklen_t* len);
int fcntl(int fd, int cmd, long arg = 0);
int ioctl(int fd, unsigned long request, void* arg);
int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms);
int epoll_wait(int epfd, struct epoll_event* events, int maxevents, int timeout_ms);
int dup3(int oldfd, int newfd, int flags);

}  // namespace vsocket::sys

// DupPrivate, MovePrivate: where vsocket's own descriptors live.
#include "base/private_fd.h"  // IWYU pragma: export

namespace vsocket::sys {

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_REAL_LIBC_H_
