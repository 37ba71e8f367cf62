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
/* poll(2).  Shared-memory connections are read from their rings for up to
 * VSOCKET_SPIN_US before the kernel sleeps; the other descriptors are
 * looked at without sleeping every 64 µs meanwhile (a pipe ready beside a
 * ready connection may be reported one look later). */
VSOCKET_API int vsocket_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms);

/* ---- Zero copy: registered send buffers and in-place receive. ----
 *
 * For buffers an application sends again and again (a training step's
 * gradients, a reply arena): register the buffer once, then send ranges of
 * it.  On an RDMA connection the NIC reads the bytes straight from the
 * application's memory (no CPU copy); the buffer is registered with a
 * device lazily, the first time it is sent on a connection of that device,
 * and stays registered until vsocket_deregister().  On shared memory and
 * TCP the bytes take the ordinary send path (one copy into the ring or the
 * kernel): the calls work on every connection, only the cost differs.
 *
 * In-place receive hands out the next received bytes where the transport
 * already holds them: on RDMA the receive ring the NIC wrote, on shared
 * memory the ring the peer wrote (no copy at all); on TCP a per-connection
 * buffer filled by a MSG_PEEK (one copy).  The bytes stay unread, and the
 * peer cannot overwrite them, until vsocket_recv_release(); only then is
 * their ring space given back to the sender.
 */
struct vsocket_region;

/* Registers [buf, buf + len) for vsocket_send_registered(), for the whole
 * process (any connection, any thread).  Returns the region, or NULL with
 * errno EINVAL (buf NULL, len 0, or the range wraps) or ENOMEM.  The buffer
 * is not copied: it must stay allocated until vsocket_deregister(), and the
 * application may change it between sends (never during one). */
VSOCKET_API struct vsocket_region* vsocket_register(const void* buf, size_t len);

/* Releases the region (and its registration with every RDMA device).
 * 0, or -1 with errno EINVAL (region NULL) or EBUSY (a
 * vsocket_send_registered() from it is running in another thread; nothing
 * changed, try again after it returned).  REQUIRES: no send from the
 * region starts after this call began; afterwards the pointer is dead. */
VSOCKET_API int vsocket_deregister(struct vsocket_region* region);

/* Sends region bytes [offset, offset + len) on the connected socket fd, with
 * the blocking, SO_SNDTIMEO, MSG_DONTWAIT, MSG_NOSIGNAL (EPIPE/SIGPIPE) and
 * errno behaviour of vsocket_send(): the bytes sent (fewer than len only if
 * a timeout, a signal or MSG_DONTWAIT ended the wait for ring space), or -1.
 * It returns only when the sent bytes may be changed again: on RDMA once
 * the NIC has read them (after their completion; MSG_DONTWAIT never waits
 * for ring space, but does wait for that completion, which needs only the
 * NIC), elsewhere once they were copied.
 * Errors besides send's: EINVAL (region NULL, being deregistered, or the
 * range is not inside it).  A descriptor that is not a vsocket socket gets
 * libc's send() of the bytes (EBADF, ENOTSOCK, ... as send).  After an
 * ECONNRESET the NIC may still read bytes of that send until the socket
 * is closed. */
VSOCKET_API ssize_t vsocket_send_registered(int fd, struct vsocket_region* region,
                                            size_t offset, size_t len, int flags);

/* Waits like vsocket_recv() (O_NONBLOCK / MSG_DONTWAIT, SO_RCVTIMEO, EINTR)
 * until data, end of stream or an error, then sets *data to the next unread
 * bytes of the stream and returns how many (1..max) lie contiguously there:
 * often fewer than are readable (a ring wraps; TCP views at most 256 KiB).
 * Returns 0 at end of stream (or if max is 0), -1 with errno as recv
 * (EAGAIN, ECONNRESET, EINTR, ENOTCONN, EBADF, ENOTSOCK).  The bytes are
 * not consumed: they stay valid, unchanged and unread until
 * vsocket_recv_release() or vsocket_close() of the socket (unchanged by
 * vsocket: a hostile shared-memory peer of another user that
 * VSOCKET_SHARE_UIDS lists can still write them; copy before validating
 * such a peer's bytes, docs/PROTOCOL.md, "Threat model").
 * One view per socket: a second call before the release (or while another
 * thread waits in this call) fails with EBUSY.  Other errors: EFAULT (data
 * NULL), EINVAL (flags other than MSG_DONTWAIT), EOPNOTSUPP (a kernel
 * socket vsocket did not create).
 * REQUIRES: no other receive call (recv, read, ...) on the socket while a
 * view is outstanding: it would consume the view's bytes. */
VSOCKET_API ssize_t vsocket_recv_inplace(int fd, const void** data, size_t max,
                                         int flags);

/* Ends the outstanding view of fd, consuming its first n bytes (0 <= n <=
 * the count vsocket_recv_inplace returned; the rest stays unread for the
 * next receive call).  Their ring space goes back to the sender now.
 * 0, or -1 with errno EINVAL (no view, or n too large), ENOTCONN, EBADF,
 * ENOTSOCK, EOPNOTSUPP as for vsocket_recv_inplace. */
VSOCKET_API int vsocket_recv_release(int fd, size_t n);

/* ---- Introspection: which path a connection took, and why. ---- */

/* "shm", "rdma", "toe", "tcp", or NULL (errno EBADF) if fd is not a vsocket
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
