#include "vsocket/stream_io.h"

#include <errno.h>
#include <signal.h>

#include <vector>

#include "vsocket/iovec_util.h"
#include "vsocket/wait.h"

namespace vsocket {
namespace {

ssize_t Fail(int err) {
  errno = err;
  return -1;
}

// The attempts and waits of one send.  Returns the bytes sent (>= 0),
// -errno, or kStreamMoved with *sent = the bytes sent before the move.
ssize_t SendLoop(StreamSteps& steps, StreamCall& call, const struct msghdr* msg,
                 uint64_t total, const IoOptions& io, size_t* sent_out) {
  const struct iovec* iov = msg->msg_iov;
  int iovcnt = static_cast<int>(msg->msg_iovlen);
  if (total == 0) {
    ssize_t r = steps.TrySend(call, iov, 0, 0);
    return r == -EAGAIN ? 0 : r;
  }
  int64_t deadline = -1;
  bool deadline_set = false;  // computed at the first wait: no clock read
                              // on calls that never wait
  size_t sent = 0;
  for (;;) {
    ssize_t r = steps.TrySend(call, iov, iovcnt, sent);
    if (r > 0) {
      sent += static_cast<size_t>(r);
      if (sent >= total) return static_cast<ssize_t>(sent);
      continue;
    }
    if (r == kStreamMoved) {
      *sent_out = sent;
      return kStreamMoved;
    }
    if (r == 0) return static_cast<ssize_t>(sent);
    if (r != -EAGAIN || call.nonblocking) return sent > 0 ? static_cast<ssize_t>(sent) : r;
    if (!deadline_set) {
      deadline = DeadlineAfter(io.timeout_ns);
      deadline_set = true;
    }
    int w = steps.WaitWritable(call, deadline);
    if (w < 0) return sent > 0 ? static_cast<ssize_t>(sent) : w;
  }
}

// The attempts and waits of one receive.  Returns the bytes received
// (>= 0), -errno, or kStreamMoved (only before any byte was received).
ssize_t RecvLoop(StreamSteps& steps, StreamCall& call, struct msghdr* msg,
                 int flags, uint64_t total, const IoOptions& io) {
  const struct iovec* iov = msg->msg_iov;
  int iovcnt = static_cast<int>(msg->msg_iovlen);
  bool peek = (flags & MSG_PEEK) != 0;
  bool wait_all = (flags & MSG_WAITALL) && !peek;
  int64_t deadline = -1;
  bool deadline_set = false;
  size_t got = 0;
  for (;;) {
    ssize_t r = steps.TryRecv(call, iov, iovcnt, got, peek);
    if (r > 0) {
      got += static_cast<size_t>(r);
      if (!wait_all || got >= total) return static_cast<ssize_t>(got);
      continue;
    }
    if (r == 0) return static_cast<ssize_t>(got);  // end of stream
    // Moved after some bytes: they are this call's answer; the successor
    // serves the next call.
    if (r == kStreamMoved) return got > 0 ? static_cast<ssize_t>(got) : r;
    if (r != -EAGAIN || call.nonblocking) return got > 0 ? static_cast<ssize_t>(got) : r;
    if (!deadline_set) {
      deadline = DeadlineAfter(io.timeout_ns);
      deadline_set = true;
    }
    int w = steps.WaitReadable(call, deadline);
    if (w < 0) return got > 0 ? static_cast<ssize_t>(got) : w;
  }
}

}  // namespace

ssize_t StreamSendMsg(StreamSteps& steps, const struct msghdr* msg, int flags,
                      const IoOptions& io) {
  // Kernel TCP would send urgent data; we cannot carry it, and sending the
  // bytes as ordinary data would change the stream a peer without
  // SO_OOBINLINE reads.  Refuse, as for sockets without urgent data.
  if (flags & MSG_OOB) return Fail(EOPNOTSUPP);
  uint64_t total = IovTotal(msg->msg_iov, msg->msg_iovlen);
  StreamCall call;
  call.sending = true;
  call.nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
  call.spin_ns = io.spin_ns;
  steps.BeginCall(call);
  size_t sent = 0;
  ssize_t r = SendLoop(steps, call, msg, total, io, &sent);
  steps.EndCall(call);
  if (r == kStreamMoved) {
    // The rest goes to the successor, with the caller's flags (it applies
    // the same rules: it is kernel TCP).
    Transport* next = steps.MovedTo();
    if (!next) return sent > 0 ? static_cast<ssize_t>(sent) : Fail(ENOTCONN);
    if (sent == 0) return next->SendMsg(msg, flags, io);
    std::vector<struct iovec> rest = IovSuffix(msg->msg_iov, msg->msg_iovlen, sent);
    struct msghdr tail = {};
    tail.msg_iov = rest.data();
    tail.msg_iovlen = rest.size();
    ssize_t n = next->SendMsg(&tail, flags, io);
    return static_cast<ssize_t>(sent) + (n > 0 ? n : 0);
  }
  if (r >= 0) return r;
  if (r == -EPIPE && !(flags & MSG_NOSIGNAL)) ::raise(SIGPIPE);
  return Fail(static_cast<int>(-r));
}

ssize_t StreamRecvMsg(StreamSteps& steps, struct msghdr* msg, int flags,
                      const IoOptions& io) {
  // Kernel TCP: EINVAL when no urgent byte is pending, which is always
  // (we never send one), and even for a zero-length buffer.
  if (flags & MSG_OOB) return Fail(EINVAL);
  uint64_t total = IovTotal(msg->msg_iov, msg->msg_iovlen);
  ssize_t r = 0;
  if (total == 0) {
    // As kernel TCP: a zero-length receive consumes nothing but waits as a
    // receive does, until data, end of stream or an error (0; an error is
    // reported), or EAGAIN when non-blocking -- and 0 at SO_RCVTIMEO.
    // A one-byte peek asks the transport.
    char byte;
    struct iovec probe = {&byte, 1};
    StreamCall call;
    call.nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
    call.spin_ns = io.spin_ns;
    steps.BeginCall(call);
    struct msghdr peek_msg = {};
    peek_msg.msg_iov = &probe;
    peek_msg.msg_iovlen = 1;
    r = RecvLoop(steps, call, &peek_msg, MSG_PEEK, 1, io);
    steps.EndCall(call);
    if (r == kStreamMoved) {
      Transport* next = steps.MovedTo();
      if (!next) return Fail(ENOTCONN);
      return next->RecvMsg(msg, flags, io);
    }
    if (r == -EAGAIN && !call.nonblocking) r = 0;  // the timeout passed
    if (r < 0) return Fail(static_cast<int>(-r));
    r = 0;
  } else {
    StreamCall call;
    call.nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
    call.spin_ns = io.spin_ns;
    steps.BeginCall(call);
    r = RecvLoop(steps, call, msg, flags, total, io);
    steps.EndCall(call);
    if (r == kStreamMoved) {
      Transport* next = steps.MovedTo();
      if (!next) return Fail(ENOTCONN);
      return next->RecvMsg(msg, flags, io);
    }
    if (r < 0) return Fail(static_cast<int>(-r));
  }
  // A connected stream socket reports no source address, no ancillary
  // data and no flags (checked against kernel TCP: msg_namelen becomes 0
  // only when msg_name is set, and nothing changes on failure).
  if (msg->msg_name) msg->msg_namelen = 0;
  msg->msg_controllen = 0;
  msg->msg_flags = 0;
  return r;
}

}  // namespace vsocket
