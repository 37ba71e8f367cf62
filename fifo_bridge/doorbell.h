// Kernel-visible readiness for a shared-memory connection.
//
// Each side owns one unbound-peer Unix datagram socket, its wait socket A,
// bound to an abstract name derived from the connection key (so the peer
// can reach it by name, and only inside the same network namespace).  A is
// the descriptor the application sees and polls:
//   POLLIN  <=> a datagram is queued in A: a wake-up, or the peer's filler.
//   POLLOUT <=> A has send-buffer room; "filler" datagrams that A sent into
//               the peer's A and the peer has not drained yet use it up.
// Wake-ups are sent from this process's wake socket (ProcessWakeSocket),
// so pending ones never count against A's send buffer; datagrams for the
// peer's liveness watcher thread go to the peer process's wake socket, with
// the peer side's name as payload.  So a side needs no socket but A.  A
// server that cannot claim an offer says so with a datagram of one byte
// 'D' into the client's A (DeclineOffer), which draining reports.
// End of stream is shown the way the kernel shows it for TCP: A is shut down
// for reading (readable for ever, POLLRDHUP) and, once neither direction can
// carry data, for writing too (POLLHUP).  A duplicate of A taken for that
// moment does it, checked to be A by its inode, so the application may
// close or renumber its descriptor meanwhile (and no descriptor is held
// for it between hang-ups).
// Other datagrams carry no meaning: all state lives in the ring's control
// block.
// A hostile local process can send spurious wake-ups; that costs a spurious
// wake, never data.
//
// Threading: all methods are thread-safe at the kernel level; callers decide
// when to call them (see shm_channel.h for the protocol).  Only A's
// number is the application's: FillSendBuffer and DrainWakeups use it as
// it stands (callers are inside a call on that descriptor), every other
// method sends from a private socket or checks A's identity first.
#ifndef VSOCKET_FIFO_BRIDGE_DOORBELL_H_
#define VSOCKET_FIFO_BRIDGE_DOORBELL_H_

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <atomic>
#include <string>

namespace vsocket::fifo {

// This process's wake socket (fifo_bridge/liveness_watcher.h creates it
// and sets it here, -1 for none): doorbells send their wake-ups from it,
// so its send buffer, not a connection's wait socket's, holds them until
// the peer drains them.  Without one, each wake-up leaves from a socket
// made for it.
void SetProcessWakeSocket(int fd);
int ProcessWakeSocket();

class Doorbell {
 public:
  Doorbell() = default;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  ~Doorbell();

  // Creates and binds this side's wait socket.  `key` names the
  // connection; `my_role`/`peer_role` are 'c' or 's'.  Returns 0 or -errno
  // (-EADDRINUSE when a name is taken).
  int Open(const std::string& key, char my_role, char peer_role);

  // A doorbell handed over across exec: `wait_fd` must be a Unix datagram
  // socket bound to this side's name of one connection
  // ("vsk1/<key>/<my_role>A"); the peer's names follow from the key.
  // Returns 0 (the doorbell now names it) or -EINVAL.
  int AdoptInherited(int wait_fd, char my_role);

  // The wait socket.  The owner may move it to another descriptor number
  // (dup2) and report the new number with set_wait_fd.
  int wait_fd() const { return wait_fd_.load(std::memory_order_relaxed); }
  void set_wait_fd(int fd) { wait_fd_.store(fd, std::memory_order_relaxed); }
  // True when number `fd` still names our wait socket: the application may
  // have closed it, and the kernel given the number to a new socket.
  bool IsOurWaitSocket(int fd) const;
  // "<peer role><key>": what our datagrams to the peer's wake socket say.
  const std::string& peer_wake_name() const { return peer_wake_name_; }
  // "<my role><key>": what the peer's datagrams to our wake socket say.
  const std::string& my_wake_name() const { return my_wake_name_; }

  // Queues one wake-up in the peer's wait socket.  A full queue means a
  // wake-up is already pending and counts as success.  Returns 0 or -errno
  // (-ECONNREFUSED once the peer's socket is gone).
  int RingPeer() const;
  // Queues one wake-up in our own wait socket.
  int RingSelf() const;
  // Queues one datagram naming the peer's side in the wake socket of
  // process `peer_pid`: its liveness watcher thread looks at the connection
  // (drains our filler, notices a close) without making the peer's wait
  // socket readable.  Returns 0 or -errno: -ECONNREFUSED (no such process,
  // or one without a wake socket) and -EAGAIN (its queue is full) mean the
  // caller must wake the peer's wait socket instead.
  int WakePeerWatcher(pid_t peer_pid) const;
  // Empties our wait socket of wake-ups and filler.  Returns what it took:
  // how many datagrams, and whether one was a decline (DeclineOffer).
  struct Drained {
    int datagrams = 0;
    bool declined = false;
    bool declined_for_uid = false;  // one said DeclineWhy::kUsersDoNotShare
  };
  Drained DrainWakeups() const;

  // Server, when it cannot claim the offer of connection `key` (another
  // user's segment, a setup failure): the one-byte datagram 'D' into the
  // client's wait socket, from a socket of its own.  It makes the socket
  // readable, so a client waiting for the answer wakes, drains it and moves
  // to TCP at once instead of at its claim timeout (its watcher looks too).
  // No wake-up is ever 'D'.  With kUsersDoNotShare the datagram is "DU":
  // the accepting process runs as a user the client's does not share memory
  // with (either side's VSOCKET_SHARE_UIDS), so the client names the reason
  // uid_mismatch.  Returns 0 or -errno (no such client: gone already).
  enum class DeclineWhy { kOther, kUsersDoNotShare };
  static int DeclineOffer(const std::string& key, DeclineWhy why = DeclineWhy::kOther);

  // Server, first in a claim: whether the client of connection `key` may
  // have made an offer, i.e. a socket holds its wait socket's name (the
  // client binds it before its SYN and keeps it while the connection
  // lives, for named and sealed offers alike).  One connect() of a probe
  // socket the process keeps (a socket and a close the first time): so a
  // plain TCP client costs the server one system call.
  // False only when no socket has that name; a stranger who bound it makes
  // it true, and the claim then finds no segment and declines as before.
  static bool ClientWaitSocketBound(const std::string& key);

  // True when `fd` is a Unix datagram socket bound to a vsocket name (a
  // wait socket, of any connection or process).
  static bool IsVsocketDatagramSocket(int fd);

  // Sends filler into the peer's wait socket until ours reports no
  // POLLOUT (two datagrams).  The peer's DrainWakeups takes them with its
  // wake-ups, which makes our wait socket writable again.  Returns 0 or
  // -errno (the peer's wait socket is gone or shut down for reading).
  int FillSendBuffer() const;
  // DrainWakeups through a private duplicate of A checked to be A, for a
  // thread that is not inside a call on the descriptor (the watcher).
  Drained DrainWakeupsChecked() const;

  // shutdown(2) of the wait socket itself, `how` = SHUT_RD (POLLRDHUP) or
  // SHUT_RDWR (POLLHUP too), through a private duplicate of wait_fd() taken
  // and closed here, used only if it is still our socket (same inode: the
  // number was not closed and reused).  Wake-ups sent to it afterwards are
  // refused, which the wake-up protocol tolerates.  Any thread, until
  // Close().
  void ShutdownWaitSocket(int how) const;

  // Closes the wait socket (idempotent).
  // REQUIRES: no other thread is inside ShutdownWaitSocket().
  void Close();

 private:
  // Takes `fd` as the wait socket and records its identity for
  // ShutdownWaitSocket's check.  0 or -errno (fstat failed).
  int SetWaitSocket(int fd);

  // Runs `use` on a private duplicate of A, if it is still A.
  template <typename Use>
  void WithCheckedWaitSocket(Use use) const;

  std::atomic<int> wait_fd_{-1};  // moved by the socket layer, any thread
  std::string peer_wake_name_;
  std::string my_wake_name_;
  // The wait socket's identity, for ShutdownWaitSocket's check.
  dev_t wait_dev_ = 0;
  ino_t wait_ino_ = 0;
  struct sockaddr_un my_wait_addr_ {};
  socklen_t my_wait_len_ = 0;
  struct sockaddr_un peer_wait_addr_ {};
  socklen_t peer_wait_len_ = 0;
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_DOORBELL_H_
