// ReadinessSocket: the kernel descriptor an application holds for an RDMA
// connection, whose poll()/epoll readiness is set by the transport.
//
// A connected pair of Unix datagram sockets (socketpair): the USER end is the
// application's descriptor, the PRIVATE end is ours.
//   POLLIN  on the user end <=> one token datagram (sent from the private
//           end) is queued in it.
//   POLLOUT on the user end <=> its send buffer has room: "filler"
//           datagrams sent from the user end to the private end, and not yet
//           drained there, use it up (SO_SNDBUF is set to the minimum, so a
//           few datagrams clear POLLOUT).
// Datagrams carry no meaning; the transport's state decides what to show.
//   POLLRDHUP (and POLLIN) <=> the user end was shut down for reading;
//   POLLHUP <=> for both directions (as kernel TCP: the peer can send no
//           more / neither direction can carry data).  Both are for good.
// Every operation on the user end goes through a private duplicate of it,
// so a descriptor number the application closed or reused is never touched.
//
// Threading: thread-compatible; RdmaTransport calls it under its mutex.
// Ownership: the private end is owned and closed by this object; so is the
// user end until TakeNumber() gives it the application's number, after
// which it belongs to the socket layer.
//
// Open() makes every descriptor the connection will need, all at private
// numbers, so that it can run before the peer commits to the connection
// (before the client's SYN); TakeNumber() after that needs none.
#ifndef VSOCKET_RDMA_BACKEND_READINESS_SOCKET_H_
#define VSOCKET_RDMA_BACKEND_READINESS_SOCKET_H_

#include <atomic>

namespace vsocket::rdma {

class ReadinessSocket {
 public:
  ReadinessSocket() = default;
  ReadinessSocket(const ReadinessSocket&) = delete;
  ReadinessSocket& operator=(const ReadinessSocket&) = delete;
  // Closes the private end, and the user end unless TakeNumber gave it away.
  ~ReadinessSocket();

  // Creates the pair (close-on-exec), the user end at a private number (see
  // base/private_fd.h).  It starts writable and not readable.  0 or -errno
  // (-EMFILE: no private number left).
  int Open();
  // Moves another object's open pair here.  REQUIRES: this one not opened.
  void MoveFrom(ReadinessSocket& other);

  // The application's number `fd` (a kernel socket) becomes the user end;
  // the socket that had it moves to the private number the user end leaves,
  // which is returned (the caller owns it).  Keeps `fd`'s close-on-exec
  // flag.  Makes no descriptor: two dup3() onto open numbers.  -errno on
  // failure, with `fd` unchanged.
  // REQUIRES: Open() succeeded; TakeNumber not called before.
  int TakeNumber(int fd);

  // May be read without the transport's lock (a sleeping caller polls it).
  int user_fd() const { return user_fd_.load(std::memory_order_relaxed); }
  // The user end now lives at descriptor `fd` (dup2/dup3 by the socket
  // layer): use `fd` from now on.
  void set_user_fd(int fd) { user_fd_.store(fd, std::memory_order_relaxed); }
  // For a pair never handed to the application: closes the user end now
  // (the destructor would, but the transport's core may outlive it).
  void CloseUserEnd();

  // Makes the user end readable (true) or not (false).  Cheap when the state
  // does not change (no system call).
  void SetReadable(bool readable);
  // What the user end shows now (as last set).
  bool readable() const { return readable_; }
  // Makes the user end writable (true) or not (false).  Idem.
  void SetWritable(bool writable);
  // Raises POLLRDHUP (`rdhup`) / POLLHUP (`hup`) on the user end, for good;
  // false leaves the state as it is.  Cheap once set.
  void SetHangup(bool rdhup, bool hup);

  // Closes the private end: the user end stays readable and writable for
  // good (EOF-like), so nobody blocks on it.
  void Close();

 private:
  std::atomic<int> user_fd_{-1};
  int user_dup_ = -1;     // private duplicate of the user end (ours)
  int private_fd_ = -1;
  bool readable_ = false;
  bool blocked_ = false;  // filler queued: not writable
  bool rd_shut_ = false;  // POLLRDHUP raised
  bool wr_shut_ = false;  // POLLHUP raised (with rd_shut_)
  bool handed_out_ = false;  // TakeNumber gave the user end away
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_READINESS_SOCKET_H_
