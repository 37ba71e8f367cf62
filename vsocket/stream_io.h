// The POSIX rules of send/recv/sendmsg/recvmsg on a connected SOCK_STREAM
// socket, written once for every transport that moves bytes itself
// (ShmTransport, RdmaTransport): partial counts,
// EAGAIN, MSG_DONTWAIT, MSG_WAITALL, MSG_PEEK, MSG_NOSIGNAL/SIGPIPE, the
// SO_SNDTIMEO/SO_RCVTIMEO deadline, EINTR, zero-length calls, MSG_OOB and
// the msghdr fields a receive reports.
//
// A transport implements StreamSteps -- one non-blocking attempt and one
// bounded wait per direction -- and its SendMsg/RecvMsg become
//   return StreamSendMsg(*this, msg, flags, io);
// The core is a template over the transport's class only so that the
// compiler calls a final transport's steps directly (the fast path stays
// free of indirect calls); its rules are written once, here.
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

#include <errno.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "vsocket/kernel_wait.h"

#include "vsocket/iovec_util.h"
#include "vsocket/transport.h"
#include "vsocket/wait.h"

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
  // Sends: MSG_MORE (more data follows: a transport that holds partial
  // sends, as kernel TCP does, may hold this one's bytes).
  bool more = false;
  // O_NONBLOCK or MSG_DONTWAIT: the core never waits, and an attempt's
  // -EAGAIN ends the call (the caller may go and sleep in poll/epoll).
  bool nonblocking = false;
  uint32_t spin_ns = 0;      // IoOptions::spin_ns
  int64_t timeout_ns = -1;   // IoOptions::timeout_ns (SO_SNDTIMEO/SO_RCVTIMEO)
  // The transport's own per-call state, 0 at BeginCall (e.g. shm's
  // busy-poll phase).  The core never looks at it.
  uint32_t transport_state = 0;
  // Receives: WaitReadable waits until this many bytes are queued (or end
  // of stream, an error...): SO_RCVLOWAT's mark (IoOptions::recv_lowat),
  // 1 unless the program set one.  As kernel TCP, whose tcp_data_ready
  // wakes a sleeping reader only once the mark's bytes are queued (bytes
  // the call already took do not count).  A transport that returns sooner
  // makes a receive below the mark take bytes as they come (a MSG_PEEK
  // spins); one may wait for fewer when the mark cannot fit in its
  // buffers.
  uint64_t wait_bytes = 1;

  // The call's deadline (MonotonicNs, -1 = none), fixed by the first
  // request: a wait asks only once it is about to sleep, so a call whose
  // busy-poll succeeds never reads the clock.
  int64_t deadline_ns() {
    if (!deadline_set_) {
      deadline_ns_ = DeadlineAfter(timeout_ns);
      deadline_set_ = true;
    }
    return deadline_ns_;
  }

 private:
  int64_t deadline_ns_ = -1;
  bool deadline_set_ = false;
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
  // (spurious returns are fine), -EAGAIN once call.deadline_ns() has
  // passed, -EINTR after a signal that must interrupt the call (the
  // transport resumes after SA_RESTART handlers itself:
  // vsocket/signal_restart.h).  May block, on the calling thread only.
  virtual int WaitWritable(StreamCall& call) = 0;
  virtual int WaitReadable(StreamCall& call) = 0;

  // After an attempt returned kStreamMoved: the transport that carries the
  // connection now, which the core hands the rest of the call to.
  // REQUIRES: non-null then; it outlives this call (its owner, the
  // VirtualSocket, keeps both alive).
  virtual Transport* MovedTo() { return nullptr; }

 protected:
  ~StreamSteps() = default;
};

// The cold ends of a call, out of line (stream_io.cc).
namespace stream_io_internal {
// -1 with errno = err.
ssize_t Fail(int err);
// The kernel's checks of a msghdr, in its order, before anything is moved
// (copy_msghdr_from_user, import_iovec): the whole msghdr must be
// readable: EFAULT; msg_name set with a msg_namelen above INT_MAX (negative
// to the kernel): EINVAL; for a send, the address msg_name names must be
// readable: EFAULT (then ignored, as TCP ignores it); more than UIO_MAXIOV
// entries: EMSGSIZE; a null array with entries: EFAULT; an entry (or the
// sum) over SSIZE_MAX: EINVAL.  Ancillary data is not looked at (not
// supported: docs/COMPATIBILITY.md).  0 when the call may go on, else the
// errno.  `*total` = the array's length.
int CheckIovArray(const struct msghdr* msg, bool sending, uint64_t* total);
// The bytes a checked array holds (IoOptions::msghdr_checked: vsocket's own
// msghdr, whose array it built or checked).  The common case, one entry,
// reads no more than that.
inline uint64_t IovTotal(const struct msghdr* msg) {
  if (msg->msg_iovlen == 1) [[likely]] return msg->msg_iov[0].iov_len;
  uint64_t total = 0;
  for (size_t i = 0; i < msg->msg_iovlen; ++i) total += msg->msg_iov[i].iov_len;
  return total;
}
// sendmsg with MSG_FASTOPEN on a connected socket, after CheckIovArray:
// the errno kernel TCP (tcp_sendmsg_fastopen, its client bit set, the
// default) answers with, nothing sent: EINVAL for a msg_name of one byte,
// EOPNOTSUPP for an AF_UNSPEC one, else EISCONN.
int FastOpenError(const struct msghdr* msg);
// A receive's last step on success: the msghdr fields kernel TCP writes
// back (____sys_recvmsg): msg_namelen 0 when msg_name is set,
// msg_controllen 0, msg_flags MSG_CMSG_CLOEXEC when the call had it, else
// 0.  False when the msghdr cannot be written: the call is EFAULT, as the
// kernel's, with its bytes consumed.
bool SetReceivedFields(struct msghdr* msg, int flags);
// recvmsg with MSG_TRUNC and `total` > 0 bytes asked for: kernel TCP
// discards up to `total` bytes without writing the caller's buffers (which
// may be null); with MSG_PEEK it reports how many are queued, up to
// `total`.  `recv(steps, ...)` (the receive without MSG_TRUNC) runs into a
// scratch buffer of at most kMaxTruncScratch bytes, repeated for
// MSG_WAITALL: a peek counts at most that many.  On success `msg`'s output
// fields are set as a receive sets them.
inline constexpr uint64_t kMaxTruncScratch = uint64_t{1} << 20;
ssize_t RecvIntoScratch(ssize_t (*recv)(void* steps, struct msghdr* msg,
                                        int flags, const IoOptions& io),
                        void* steps, struct msghdr* msg, uint64_t total,
                        int flags, const IoOptions& io);
// The end of a send: `r` as SendLoop returned it (bytes, -errno, or
// kStreamMoved after `sent` bytes, when the rest goes to steps.MovedTo()).
ssize_t FinishSend(StreamSteps& steps, ssize_t r, size_t sent,
                   const struct msghdr* msg, int flags, const IoOptions& io);
// The end of a receive that did not succeed on this transport (-errno or
// kStreamMoved).
ssize_t FinishRecvElsewhere(StreamSteps& steps, ssize_t r, struct msghdr* msg,
                            int flags, const IoOptions& io);
}  // namespace stream_io_internal

// sendmsg(2) over `steps`: returns the bytes sent, or -1 with errno.  A
// blocking call returns only once every byte was taken, or with a short
// count when a timeout, signal or error cut it short after some bytes.
// MSG_OOB: -1 with EOPNOTSUPP (urgent data cannot be carried); MSG_FASTOPEN:
// -1 with FastOpenError (EISCONN).  Both calls first check the msghdr and its iovec array
// as the kernel does (CheckIovArray).  EPIPE
// raises SIGPIPE unless MSG_NOSIGNAL.  msg_name is ignored, as TCP does.
// `Steps` is the transport's own (final) class, so that the steps are
// called directly, without an indirect call each on the hot path; any
// StreamSteps works.  Defined below.
template <typename Steps>
ssize_t StreamSendMsg(Steps& steps, const struct msghdr* msg, int flags,
                      const IoOptions& io);

// recvmsg(2) over `steps`: returns the bytes received, 0 at end of stream,
// or -1 with errno.  SO_RCVLOWAT (io.recv_lowat) as kernel TCP's
// tcp_recvmsg applies it: a blocking call takes what is queued, and until
// it has min(mark, length) bytes (MSG_WAITALL: all) it sleeps until the
// mark's bytes are queued (StreamCall::wait_bytes), end of stream, an
// error, a signal or the timeout; at the last two it takes what is queued
// then and returns what it has.  A blocking MSG_PEEK does the same without
// consuming.  A zero-length buffer waits as kernel TCP does (until
// data, end of stream or an error, consuming nothing; EAGAIN when
// non-blocking; 0 at the receive timeout).  Honours MSG_PEEK,
// MSG_WAITALL (short only at end of stream, or on an error, timeout or
// signal after some data), MSG_DONTWAIT, MSG_TRUNC (the bytes are
// discarded, or with MSG_PEEK counted, and the buffers never written).
// MSG_OOB: -1 with EINVAL (no urgent data is ever pending); MSG_ERRQUEUE:
// -1 with EAGAIN (the error queue is always empty).  On success, as kernel
// TCP, SetReceivedFields (EFAULT if the msghdr is read-only: the bytes are
// consumed); on failure the msghdr is left alone.
template <typename Steps>
ssize_t StreamRecvMsg(Steps& steps, struct msghdr* msg, int flags,
                      const IoOptions& io);

// ---- Implementation --------------------------------------------------------

template <typename Steps>
ssize_t StreamSendMsg(Steps& concrete, const struct msghdr* msg, int flags,
                      const IoOptions& io) {
  static_assert(std::is_base_of_v<StreamSteps, Steps>);
  StreamSteps& steps = concrete;  // devirtualised when Steps is final
  // Kernel TCP would send urgent data; we cannot carry it, and sending the
  // bytes as ordinary data would change the stream a peer without
  // SO_OOBINLINE reads.  Refuse, as for sockets without urgent data.
  if (flags & MSG_OOB) return stream_io_internal::Fail(EOPNOTSUPP);
  uint64_t total;
  if (io.msghdr_checked) {
    total = stream_io_internal::IovTotal(msg);
  } else if (int err = stream_io_internal::CheckIovArray(msg, /*sending=*/true, &total)) {
    return stream_io_internal::Fail(err);
  }
  if (flags & MSG_FASTOPEN) [[unlikely]]
    return stream_io_internal::Fail(stream_io_internal::FastOpenError(msg));
  const struct iovec* iov = msg->msg_iov;
  int iovcnt = static_cast<int>(msg->msg_iovlen);
  StreamCall call;
  call.sending = true;
  call.more = (flags & MSG_MORE) != 0;
  call.nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
  call.spin_ns = io.spin_ns;
  call.timeout_ns = io.timeout_ns;
  steps.BeginCall(call);
  size_t sent = 0;
  ssize_t r;
  if (total == 0) {
    r = steps.TrySend(call, iov, 0, 0);
    if (r == -EAGAIN) r = 0;
  } else {
    for (;;) {
      r = steps.TrySend(call, iov, iovcnt, sent);
      if (r > 0) {
        sent += static_cast<size_t>(r);
        if (sent < total) continue;
        r = static_cast<ssize_t>(sent);
        break;
      }
      if (r == kStreamMoved) break;
      if (r == 0) {
        r = static_cast<ssize_t>(sent);
        break;
      }
      if (r == -EAGAIN && !call.nonblocking) {
        BeforeWait();
        int w = steps.WaitWritable(call);
        if (w == 0) continue;
        r = w;
      }
      if (sent > 0) r = static_cast<ssize_t>(sent);
      break;
    }
  }
  steps.EndCall(call);
  if (r >= 0) [[likely]] return r;
  return stream_io_internal::FinishSend(steps, r, sent, msg, flags, io);
}

template <typename Steps>
ssize_t StreamRecvMsg(Steps& concrete, struct msghdr* msg, int flags,
                      const IoOptions& io) {
  static_assert(std::is_base_of_v<StreamSteps, Steps>);
  StreamSteps& steps = concrete;  // devirtualised when Steps is final
  uint64_t total;
  if (io.msghdr_checked) {
    total = stream_io_internal::IovTotal(msg);
  } else if (int err = stream_io_internal::CheckIovArray(msg, /*sending=*/false, &total)) {
    return stream_io_internal::Fail(err);
  }
  // Kernel TCP looks at the error queue first: nothing is ever queued
  // there (no zero-copy completions, no timestamps), so EAGAIN, blocking
  // or not, and the stream is not touched.
  if (flags & MSG_ERRQUEUE) [[unlikely]] return stream_io_internal::Fail(EAGAIN);
  // Kernel TCP: EINVAL when no urgent byte is pending, which is always
  // (we never send one), and even for a zero-length buffer.
  if (flags & MSG_OOB) return stream_io_internal::Fail(EINVAL);
  if ((flags & MSG_TRUNC) && total > 0) [[unlikely]] {
    return stream_io_internal::RecvIntoScratch(
        [](void* s, struct msghdr* m, int f, const IoOptions& o) {
          return StreamRecvMsg(*static_cast<Steps*>(s), m, f, o);
        },
        &concrete, msg, total, flags & ~MSG_TRUNC, io);
  }
  const struct iovec* iov = msg->msg_iov;
  int iovcnt = static_cast<int>(msg->msg_iovlen);
  bool peek = (flags & MSG_PEEK) != 0;
  // As kernel TCP, a zero-length receive consumes nothing but waits as a
  // receive does (until data, end of stream or an error): a one-byte peek.
  char probe_byte;
  struct iovec probe = {&probe_byte, 1};
  bool zero_length = total == 0;
  if (zero_length) {
    iov = &probe;
    iovcnt = 1;
    total = 1;
    peek = true;
  }
  ssize_t r = 0;
  {
    // Bytes a blocking call waits for (sock_rcvlowat): all with
    // MSG_WAITALL, else SO_RCVLOWAT's mark (1 unless set) up to the length.
    uint64_t target = (flags & MSG_WAITALL) && !peek
                          ? total
                          : (io.recv_lowat < total ? io.recv_lowat : total);
    StreamCall call;
    call.nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
    call.spin_ns = io.spin_ns;
    call.timeout_ns = io.timeout_ns;
    call.wait_bytes = io.recv_lowat;
    steps.BeginCall(call);
    size_t got = 0;
    for (;;) {
      r = steps.TryRecv(call, iov, iovcnt, got, peek);
      if (r > 0) {
        if (peek) [[unlikely]] {
          // A peek below the mark: wait for the mark (the bytes stay
          // queued), then look again from the start; at the timeout or a
          // signal, show what is queued then.
          if (static_cast<uint64_t>(r) < target && !call.nonblocking) {
            BeforeWait();
            int w = steps.WaitReadable(call);
            if (w == 0) continue;
            if (w == -EAGAIN || w == -EINTR) {
              ssize_t again = steps.TryRecv(call, iov, iovcnt, 0, true);
              if (again > 0) r = again;
            } else {
              r = w;
            }
          }
          break;
        }
        got += static_cast<size_t>(r);
        if (got < target) [[unlikely]] continue;
        r = static_cast<ssize_t>(got);
        break;
      }
      if (r == 0) {  // end of stream
        r = static_cast<ssize_t>(got);
        break;
      }
      // An error, timeout, signal or move (kStreamMoved) after some bytes:
      // they are this call's answer (a successor serves the next call).
      if (r == -EAGAIN && !call.nonblocking) {
        BeforeWait();
        int w = steps.WaitReadable(call);
        if (w == 0) continue;
        r = w;
        if (call.wait_bytes > 1 && (w == -EAGAIN || w == -EINTR)) [[unlikely]] {
          // Below SO_RCVLOWAT's mark at the timeout or a signal: kernel
          // TCP takes (or peeks at) what is queued by then.
          ssize_t last = steps.TryRecv(call, iov, iovcnt, got, peek);
          if (last > 0) got += static_cast<size_t>(last);
        }
      }
      if (got > 0) r = static_cast<ssize_t>(got);
      break;
    }
    steps.EndCall(call);
    if (zero_length) {
      // 0 once readable; an error as it is; EAGAIN only when non-blocking
      // (at SO_RCVTIMEO the kernel returns 0).
      if (r > 0 || (r == -EAGAIN && !call.nonblocking)) r = 0;
    }
    if (r < 0) [[unlikely]]
      return stream_io_internal::FinishRecvElsewhere(steps, r, msg, flags, io);
  }
  // A connected stream socket reports no source address, no ancillary
  // data and no flags (checked against kernel TCP: msg_namelen becomes 0
  // only when msg_name is set, and nothing changes on failure).
  if (!io.msghdr_checked && !stream_io_internal::SetReceivedFields(msg, flags)) [[unlikely]]
    return stream_io_internal::Fail(EFAULT);
  return r;
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_STREAM_IO_H_
