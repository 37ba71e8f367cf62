/* vsocket public C API.
 *
 * Every function is named after and behaves like its POSIX counterpart: same
 * arguments, same return values, and errno set on failure exactly where the
 * kernel would set it.  A descriptor returned by vsocket_socket() or
 * vsocket_accept*() is a real kernel file descriptor: plain poll(), epoll and
 * select() on it report readable / writable truthfully, whichever transport
 * carries the connection.
 *
 * Descriptors that vsocket does not know (pipes, files, kernel sockets created
 * elsewhere) may be passed to every call here; they are forwarded to libc.
 *
 * Thread safety: every call may be made from any thread.  Two threads may
 * block on the same socket, as with kernel TCP.
 */
#ifndef VSOCKET_VSOCKET_H_
#define VSOCKET_VSOCKET_H_

#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define VSOCKET_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

VSOCKET_API int vsocket_socket(int domain, int type, int protocol);
VSOCKET_API int vsocket_bind(int fd, const struct sockaddr* addr, socklen_t len);
VSOCKET_API int vsocket_listen(int fd, int backlog);
VSOCKET_API int vsocket_accept(int fd, struct sockaddr* addr, socklen_t* len);
VSOCKET_API int vsocket_accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags);
VSOCKET_API int vsocket_connect(int fd, const struct sockaddr* addr, socklen_t len);

VSOCKET_API ssize_t vsocket_send(int fd, const void* buf, size_t len, int flags);
VSOCKET_API ssize_t vsocket_recv(int fd, void* buf, size_t len, int flags);
VSOCKET_API ssize_t vsocket_sendto(int fd, const void* buf, size_t len, int flags,
                       const struct sockaddr* addr, socklen_t addrlen);
VSOCKET_API ssize_t vsocket_recvfrom(int fd, void* buf, size_t len, int flags,
                         struct sockaddr* addr, socklen_t* addrlen);
VSOCKET_API ssize_t vsocket_sendmsg(int fd, const struct msghdr* msg, int flags);
VSOCKET_API ssize_t vsocket_recvmsg(int fd, struct msghdr* msg, int flags);
VSOCKET_API ssize_t vsocket_read(int fd, void* buf, size_t len);
VSOCKET_API ssize_t vsocket_write(int fd, const void* buf, size_t len);
VSOCKET_API ssize_t vsocket_readv(int fd, const struct iovec* iov, int iovcnt);
VSOCKET_API ssize_t vsocket_writev(int fd, const struct iovec* iov, int iovcnt);

VSOCKET_API int vsocket_shutdown(int fd, int how);
VSOCKET_API int vsocket_close(int fd);

VSOCKET_API int vsocket_setsockopt(int fd, int level, int name, const void* val,
                       socklen_t len);
VSOCKET_API int vsocket_getsockopt(int fd, int level, int name, void* val,
                       socklen_t* len);
VSOCKET_API int vsocket_getsockname(int fd, struct sockaddr* addr, socklen_t* len);
VSOCKET_API int vsocket_getpeername(int fd, struct sockaddr* addr, socklen_t* len);
/* Supports F_GETFL/F_SETFL (O_NONBLOCK), F_GETFD/F_SETFD and F_DUPFD*;
 * other commands are passed to the kernel descriptor. */
VSOCKET_API int vsocket_fcntl(int fd, int cmd, ... /* long arg */);
/* FIONREAD and FIONBIO; other requests go to the kernel descriptor. */
VSOCKET_API int vsocket_ioctl(int fd, unsigned long request, void* arg);
VSOCKET_API int vsocket_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms);

/* ---- Introspection: which path a connection took, and why. ---- */

/* "shm", "rdma", "tcp", or NULL (errno EBADF) if fd is not a vsocket
   connection. */
VSOCKET_API const char* vsocket_transport_name(int fd);
/* The named reason the connection is not on a fast path ("peer_not_vsocket",
 * "uid_mismatch", ...), "" when it is on one, NULL (errno EBADF) if unknown. */
VSOCKET_API const char* vsocket_fallback_reason(int fd);
/* Writes the process statistics as one JSON line (the VSOCKET_STATS shape)
 * into buf, NUL-terminated. Returns the length it needed, like snprintf. */
VSOCKET_API size_t vsocket_stats_json(char* buf, size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VSOCKET_VSOCKET_H_ */
