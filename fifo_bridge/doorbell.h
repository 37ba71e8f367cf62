// Kernel-visible readiness for a shared-memory connection.
//
// Each side owns two unbound-peer Unix datagram sockets, bound to abstract
// names derived from the connection key (so the peer can reach them by name,
// and only inside the same network namespace):
//   wait socket (A): the descriptor the application sees and polls.
//       POLLIN  <=> a wake-up datagram is queued in A.
//       POLLOUT <=> A has send-buffer room; "filler" datagrams that A sent to
//                   the peer's sink and the peer has not drained yet use it up.
//   sink (K):   receives the peer's filler; also the source of the wake-ups we
//               send, so pending wake-ups never count against A's send buffer.
//               A datagram in K wakes this process's watcher thread
//               (WakePeerWatcher), never the application.
// End of stream is shown the way the kernel shows it for TCP: A is shut down
// for reading (readable for ever, POLLRDHUP) and, once neither direction can
// carry data, for writing too (POLLHUP).  A duplicate of A taken for that
// moment does it, checked to be A by its inode, so the application may
// close or renumber its descriptor meanwhile (and no descriptor is held
// for it between hang-ups).
// Datagrams carry no meaning: all state lives in the ring's control block.
// A hostile local process can send spurious wake-ups; that costs a spurious
// wake, never data.
//
// Threading: all methods are thread-safe at the kernel level; callers decide
// when to call them (see shm_transport.h for the protocol).
#ifndef VSOCKET_FIFO_BRIDGE_DOORBELL_H_
#define VSOCKET_FIFO_BRIDGE_DOORBELL_H_

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>

#include <string>

namespace vsocket::fifo {

class Doorbell {
 public:
  Doorbell() = default;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  ~Doorbell();

  // Creates and binds this side's wait socket and sink.  `key` names the
  // connection; `my_role`/`peer_role` are 'c' or 's'.  Returns 0 or -errno
  // (-EADDRINUSE when a name is taken).
  int Open(const std::string& key, char my_role, char peer_role);

  // A doorbell handed over across exec: `wait_fd` and `sink_fd` must be Unix
  // datagram sockets bound to this side's names of one connection
  // ("vsk1/<key>/<my_role>A" and ".../<my_role>K"); the peer's names follow
  // from the key.  Returns 0 (the doorbell now owns both descriptors) or
  // -EINVAL (it owns neither).
  int AdoptInherited(int wait_fd, int sink_fd, char my_role);

  // The wait socket.  The owner may move it to another descriptor number
  // (dup2) and report the new number with set_wait_fd.
  int wait_fd() const { return wait_fd_.load(std::memory_order_relaxed); }
  void set_wait_fd(int fd) { wait_fd_.store(fd, std::memory_order_relaxed); }
  int sink_fd() const { return sink_fd_; }

  // Queues one wake-up in the peer's wait socket.  A full queue means a
  // wake-up is already pending and counts as success.  Returns 0 or -errno
  // (-ECONNREFUSED once the peer's socket is gone).
  int RingPeer() const;
  // Queues one wake-up in our own wait socket.
  int RingSelf() const;
  // Queues one datagram in the peer's sink: its liveness watcher thread
  // wakes and looks at the connection (drains our filler, notices a close),
  // without making the peer's wait socket readable.
  int WakePeerWatcher() const;
  // Empties our wait socket of wake-ups.
  void DrainWakeups() const;

  // Server, when it cannot claim the offer of connection `key` (another
  // user's segment, a setup failure): one datagram into the client's sink
  // from a socket of its own, so the client moves to TCP at once instead of
  // at its claim timeout.  Before a claim the client's sink hears from
  // nobody else.  Returns 0 or -errno (no such client: gone already).
  static int DeclineOffer(const std::string& key);

  // Sends filler to the peer's sink until our wait socket reports no
  // POLLOUT.  Returns 0 or -errno (peer gone).
  int FillSendBuffer() const;
  // Empties our sink, which makes the peer's wait socket writable again.
  void DrainSink() const;

  // shutdown(2) of the wait socket itself, `how` = SHUT_RD (POLLRDHUP) or
  // SHUT_RDWR (POLLHUP too), through a private duplicate of wait_fd() taken
  // and closed here, used only if it is still our socket (same inode: the
  // number was not closed and reused).  Wake-ups sent to it afterwards are
  // refused, which the wake-up protocol tolerates.  Any thread, until
  // Close().
  void ShutdownWaitSocket(int how) const;

  // Closes both sockets (idempotent).
  // REQUIRES: no other thread is inside ShutdownWaitSocket().
  void Close();

 private:
  // Takes `fd` as the wait socket and records its identity for
  // ShutdownWaitSocket's check.  0 or -errno (fstat failed).
  int SetWaitSocket(int fd);

  std::atomic<int> wait_fd_{-1};  // moved by the socket layer, any thread
  int sink_fd_ = -1;
  // The wait socket's identity, for ShutdownWaitSocket's check.
  dev_t wait_dev_ = 0;
  ino_t wait_ino_ = 0;
  struct sockaddr_un my_wait_addr_ {};
  socklen_t my_wait_len_ = 0;
  struct sockaddr_un peer_wait_addr_ {};
  socklen_t peer_wait_len_ = 0;
  struct sockaddr_un peer_sink_addr_ {};
  socklen_t peer_sink_len_ = 0;
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_DOORBELL_H_
