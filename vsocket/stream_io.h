// The POSIX rules of send/recv/sendmsg/recvmsg on a connected SOCK_STREAM
// socket, written once for every transport that moves bytes itself
// (fifo_bridge/ShmTransport, rdma_backend/RdmaTransport): partial counts,
// EAGAIN, MSG_DONTWAIT, MSG_WAITALL, MSG_PEEK, MSG_NOSIGNAL/SIGPIPE, the
// SO_SNDTIMEO/SO_RCVTIMEO deadline, EINTR, zero-length calls, MSG_OOB and
// the msghdr fields a receive reports.
//
// A transport implements StreamSteps -- one non-blocking attempt and one
// bounded wait per direction -- and its SendMsg/RecvMsg become
//   return StreamSendMsg(*this, msg, flags, io);
//
// Threading: every step runs on the thread that called StreamSendMsg /
// StreamRecvMsg, in that call.  Several threads may be inside the same
// transport's steps at once (two blocked receivers, a sender and a
// receiver); per-call state lives in StreamCall, on the caller's stack.
#ifndef VSOCKET_VSOCKET_STREAM_IO_H_
#define VSOCKET_VSOCKET_STREAM_IO_H_

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <limits>

#include "vsocket/transport.h"

namespace vsocket {

// Returned by StreamSteps::TrySend/TryRecv when the connection no longer
// runs on this transport (a shared-memory client fell back to TCP under
// the call): MovedTo() names the transport that carries it now.  No valid
// byte count or -errno has this value.
inline constexpr ssize_t kStreamMoved = std::numeric_limits<ssize_t>::min();

// One SendMsg/RecvMsg call, as the steps see it.  Lives on the caller's
// stack for the duration of the call.
struct StreamCall {
  bool sending = false;
  // O_NONBLOCK or MSG_DONTWAIT: the core never waits, and an attempt's
  // -EAGAIN ends the call (the caller may go and sleep in poll/epoll).
  bool nonblocking = false;
  uint32_t spin_ns = 0;  // IoOptions::spin_ns
  // The transport's own per-call state, 0 at BeginCall (e.g. shm's
  // busy-poll phase).  The core never looks at it.
  uint32_t transport_state = 0;
};

// What a transport provides to the core.  No step sets errno for the core:
// failures are returned as -errno.
class StreamSteps {
 public:
  // Around every call that reaches the steps (not around MSG_OOB
  // rejections; a zero-length receive is a one-byte MSG_PEEK): BeginCall before the first attempt,
  // EndCall after the last step and before errno is set, also when the
  // call then continues on MovedTo().  Must not block.
  virtual void BeginCall(StreamCall& call) { (void)call; }
  virtual void EndCall(StreamCall& call) { (void)call; }

  // One attempt, never blocking.  `iov[0, iovcnt)` is the caller's array
  // as given; the first `skip` bytes of it were already moved by earlier
  // attempts of this call (so the first attempt costs no copy of the
  // array; a transport needing a suffix makes one with IovSuffix only when
  // skip > 0).  Returns bytes moved (> 0), or -errno (-EAGAIN: nothing can
  // move now), or kStreamMoved.
  // TrySend with iovcnt == 0 is a zero-length send: it moves nothing and
  // returns 0, or the error a send would report now (-EPIPE,
  // -ECONNRESET), as kernel TCP does.  Otherwise at least one byte remains
  // past `skip`.  TryRecv returns 0 at end of stream; with `peek` it
  // copies without consuming (only ever with skip == 0).
  virtual ssize_t TrySend(StreamCall& call, const struct iovec* iov,
                          int iovcnt, size_t skip) = 0;
  virtual ssize_t TryRecv(StreamCall& call, const struct iovec* iov,
                          int iovcnt, size_t skip, bool peek) = 0;

  // After an attempt returned -EAGAIN in a blocking call: waits (spinning
  // up to call.spin_ns first, as the transport sees fit) until another
  // attempt may make progress or report an error.  Returns 0 to retry
  // (spurious returns are fine), -EAGAIN once `deadline_ns` (MonotonicNs,
  // -1 = none) has passed, -EINTR after a signal that must interrupt the
  // call (the transport resumes after SA_RESTART handlers itself:
  // vsocket/signal_restart.h).  May block, on the calling thread only.
  virtual int WaitWritable(StreamCall& call, int64_t deadline_ns) = 0;
  virtual int WaitReadable(StreamCall& call, int64_t deadline_ns) = 0;

  // After an attempt returned kStreamMoved: the transport that carries the
  // connection now, which the core hands the rest of the call to.
  // REQUIRES: non-null then; it outlives this call (its owner, the
  // VirtualSocket, keeps both alive).
  virtual Transport* MovedTo() { return nullptr; }

 protected:
  ~StreamSteps() = default;
};

// sendmsg(2) over `steps`: returns the bytes sent, or -1 with errno.  A
// blocking call returns only once every byte was taken, or with a short
// count when a timeout, signal or error cut it short after some bytes.
// MSG_OOB: -1 with EOPNOTSUPP (urgent data cannot be carried).  EPIPE
// raises SIGPIPE unless MSG_NOSIGNAL.  msg_name is ignored, as TCP does.
ssize_t StreamSendMsg(StreamSteps& steps, const struct msghdr* msg, int flags,
                      const IoOptions& io);

// recvmsg(2) over `steps`: returns the bytes received, 0 at end of stream,
// or -1 with errno.  A zero-length buffer waits as kernel TCP does (until
// data, end of stream or an error, consuming nothing; EAGAIN when
// non-blocking; 0 at the receive timeout).  Honours MSG_PEEK,
// MSG_WAITALL (short only at end of stream, or on an error, timeout or
// signal after some data), MSG_DONTWAIT.  MSG_OOB: -1 with EINVAL (no
// urgent data is ever pending).  On success, as kernel TCP: msg_flags and
// msg_controllen become 0, and msg_namelen 0 when msg_name is set; on
// failure the msghdr is left alone.
ssize_t StreamRecvMsg(StreamSteps& steps, struct msghdr* msg, int flags,
                      const IoOptions& io);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_STREAM_IO_H_
