// The interface every transport implements: kernel TCP, the intra-host shared
// memory rings (fifo_bridge/), and later RDMA (rdma_backend/) and a TCP
// offload engine (toe_backend/).  One Transport object carries one connected
// stream socket, in the spirit of Seastar's connected_socket_impl.
//
// Contract for implementations:
//  - Calls follow POSIX semantics for a connected SOCK_STREAM socket: they
//    return -1 and set errno exactly where the kernel would (EAGAIN, EPIPE,
//    ECONNRESET, EINTR, ...).  SIGPIPE is raised on EPIPE unless MSG_NOSIGNAL.
//  - Blocking is the transport's job (it knows its own wait primitive), bounded
//    by IoOptions: nonblocking / timeouts / spin budget.
//  - Any thread may call any method; two threads may block in RecvMsg (or
//    SendMsg) on the same socket at once.
//  - user_fd() is a real kernel descriptor whose poll() readiness reflects the
//    transport's state truthfully; the socket layer hands it to the user.
#ifndef VSOCKET_VSOCKET_TRANSPORT_H_
#define VSOCKET_VSOCKET_TRANSPORT_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>

#include "vsocket/fallback_reason.h"
#include "vsocket/stats.h"

namespace vsocket {

// Per-call blocking behaviour, taken from the socket's flags and options.
struct IoOptions {
  bool nonblocking = false;     // O_NONBLOCK or MSG_DONTWAIT
  int64_t timeout_ns = -1;      // SO_RCVTIMEO / SO_SNDTIMEO; -1 = forever
  uint32_t spin_ns = 0;         // busy-poll budget before sleeping
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The transport currently carrying data (it may change once, from shm to
  // tcp, while a client's offer is still unclaimed).
  virtual TransportKind kind() const = 0;
  virtual FallbackReason fallback_reason() const = 0;

  virtual ssize_t SendMsg(const struct msghdr* msg, int flags,
                          const IoOptions& io) = 0;
  virtual ssize_t RecvMsg(struct msghdr* msg, int flags,
                          const IoOptions& io) = 0;
  virtual int Shutdown(int how) = 0;
  // Bytes readable without blocking (FIONREAD), or -1 with errno.
  virtual int ReadableBytes() = 0;
  // The pending socket error (SO_ERROR); clears it.
  virtual int TakeError() = 0;

  // For poll()/select() emulation: true when user_fd() reports readable
  // only because of a stale wake-up (no data, no end of stream, no error),
  // which this call drains so the descriptor stops being readable.  Never
  // consumes data or a pending error.  Transports without stale wake-ups
  // keep the default.
  virtual bool DropStaleWakeup() { return false; }

  // The descriptor the application holds (see the contract above).
  virtual int user_fd() const = 0;

  // The socket layer is closing the descriptor number user_fd() while `fd`,
  // a duplicate of it (dup/dup2/F_DUPFD: the same open file), stays open:
  // from now on the transport uses `fd` wherever it used user_fd().
  virtual void MoveUserFd(int fd) = 0;

  // The kernel TCP socket that names this connection (getsockname,
  // getpeername, options).  Owned by the transport.
  virtual int tcp_fd() const = 0;

  // Called in a child process after fork() for every live connection, so the
  // transport can count the processes that hold it.
  virtual void OnForkChild() {}
  // Called in the child process right after fork(), where only the thread
  // that forked exists: per-thread bookkeeping copied from the parent goes.
  virtual void AfterForkInChild() {}

  // Called by the socket layer when the last descriptor referring to this
  // connection in this process is closed.  Only when no other process holds
  // the connection is the peer told (FIN, or RST if unread data remains).
  // Releases every resource the transport owns except the user fd.
  virtual void Release() = 0;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TRANSPORT_H_
