// Sends coalesced across calls ("corking") for one toe connection.
//
// A small send right after a send on the same connection is copied into
// this buffer and returns at once.  The burst leaves as one sendmsg, or
// in one io_uring_enter shared with other connections (cork_list.h), at
// the first of:
//  - the buffer would pass VSOCKET_TOE_CORK bytes (the send that does
//    not fit goes out with it, in the same system call);
//  - any other call on the connection: a receive, FIONREAD, SO_ERROR,
//    shutdown, close, fork, the move to kernel TCP before an exec;
//  - any wait of the process that vsocket sees (vsocket/kernel_wait.h,
//    BeforeWait: poll, select, epoll_wait, a blocking call), and
//    setsockopt/getsockopt/ioctl on any vsocket descriptor;
//  - the flusher thread, one to two periods (1 ms each) after the burst
//    began: a sender that goes quiet without waiting.
// A send is corked only right after a send that the kernel (or the cork)
// took whole, less than kRunGapNs before and with no wait of the process
// in between: a send after any other call (a request after its answer),
// after a pause or a poll, or after a send that failed or came back short
// (a full or reset socket) goes to the kernel at once, so request/response
// latency and the kernel's errors stay the kernel's.  exit() flushes
// (atexit), and so does the interposed _exit(); SIGKILL loses what is
// held: at most VSOCKET_TOE_CORK bytes of the last 2 ms of sends
// (docs/COMPATIBILITY.md).
//
// What the kernel would refuse, the cork reports: a flush that fails
// (reset, EPIPE) drops the held bytes, as a reset drops the kernel's send
// buffer, and the connection's next send or receive returns the error.
// What the kernel cannot take yet stays held (still bounded by the cork
// size), so the program's own waits for POLLOUT see the kernel's
// readiness and the next call or wait sends it.
//
// Threading: any thread.  `mu_` serialises appends and flushes; only
// non-blocking system calls are made under it, so nothing sleeps holding
// it.  The owning ToeTransport outlives its calls; the flusher holds a
// shared_ptr and stops touching the descriptor once Detach() ran.
#ifndef VSOCKET_TOE_BACKEND_SEND_CORK_H_
#define VSOCKET_TOE_BACKEND_SEND_CORK_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "toe_backend/toe_engine.h"

namespace vsocket::toe {

class SendCork : public std::enable_shared_from_this<SendCork> {
 public:
  // Sends further apart than this are not a burst: the later one is not
  // corked.  Streaming senders' gaps are a few microseconds.
  static constexpr int64_t kRunGapNs = 200'000;

  // `fd`: the connection's kernel socket (the user's descriptor).
  // REQUIRES: cork_max > 0; `engine` outlives the cork.
  SendCork(ToeEngine* engine, ToeHandle handle, int fd, uint32_t cork_max);
  ~SendCork();
  SendCork(const SendCork&) = delete;
  SendCork& operator=(const SendCork&) = delete;

  enum class Outcome {
    kDone,        // *n is the send's result (bytes or -1 with errno)
    kSendDirect,  // nothing held now: the caller sends msg itself
    kWouldBlock,  // held bytes wait for room; a caller that may block
                  // waits for POLLOUT and calls again
  };
  // A send of `total` bytes (msg's iovecs) on the connection; may take it
  // into the buffer, or send held bytes ahead of it.  `nonblocking`: the
  // caller may not wait (O_NONBLOCK or MSG_DONTWAIT).
  Outcome Send(const struct msghdr* msg, size_t total, int flags,
               bool nonblocking, ssize_t* n);

  // What a kSendDirect send returned: a failed or short one ends the run
  // of sends (the next send goes to the kernel and sees its answer).
  void AfterDirectSend(ssize_t n, size_t total);

  // Any other call on the connection: the run of sends ends and held
  // bytes go out, without blocking.  Returns a flush error (-errno) the
  // call should report instead of its own, else 0 (EPIPE is kept for the
  // next send).
  int OtherCall();

  // Before a hand-over (shutdown, close, fork, exec, exit): held bytes go
  // out, waiting for room up to `wait_ms`.  What is still held after
  // that is dropped with one warning naming `why` and counted
  // (cork_bytes_abandoned).  Blocks; takes mu_ only between waits.
  void FlushBeforeHandOver(int wait_ms, const char* why);

  // Flush steps for cork_list.cc's batches.  REQUIRES: mu() held.
  // PrepareFlush: false when nothing is held (or the cork is detached);
  // else fills *iov and *msg (msg points at iov) for one non-blocking
  // sendmsg.  FinishFlush: what that sendmsg returned (-errno).
  bool PrepareFlush(struct iovec* iov, struct msghdr* msg);
  void FinishFlush(ssize_t result);
  std::mutex& mu() { return mu_; }
  ToeHandle handle() const { return handle_; }
  // The flusher's tick (cork_list.h, CurrentTick) at which the held bytes
  // began.
  // REQUIRES: mu() held.
  uint64_t held_since_tick() const { return held_since_tick_; }
  bool holds_bytes() const { return len_ > 0; }  // REQUIRES: mu() held

  void MoveFd(int fd);  // the application renumbered its descriptor
  // The connection is being closed: what the kernel does not take at once
  // goes to the flusher thread with a private duplicate of the socket
  // (cork_list.h, AdoptOrphan), so close() does not wait; without a free
  // descriptor for it, a bounded wait (FlushBeforeHandOver).  Then the
  // cork never touches the descriptor again.
  void Detach();

 private:
  // REQUIRES: mu_ held.  Detach's flush and hand-off; false when neither
  // was possible (the number names another file, or no descriptor free).
  bool HandOffLocked();
  // One non-blocking sendmsg of what is held (PrepareFlush, FinishFlush).
  void FlushOnceLocked();
  // REQUIRES: mu_ held, room for `total`.  False (nothing held) when the
  // caller's buffers fault (base/user_copy_guard.h).
  bool Append(const struct msghdr* msg, size_t total);
  void Consume(size_t n);
  void DropHeld();
  // A failed flush: the error the next call reports.
  void SetError(int err) { error_ = err; }
  ssize_t ReportError(int flags);  // -1 with errno; raises SIGPIPE as send would

  ToeEngine* const engine_;
  const ToeHandle handle_;
  const uint32_t max_;        // VSOCKET_TOE_CORK
  const uint32_t small_max_;  // sends up to this size may be corked

  std::mutex mu_;
  int fd_;
  char* buf_ = nullptr;  // max_ bytes, allocated on the first cork
  size_t off_ = 0;       // held bytes are buf_[off_, off_ + len_)
  size_t len_ = 0;
  uint64_t held_since_tick_ = 0;
  bool last_was_send_ = false;  // the connection's previous call was a send
  int64_t last_send_ns_ = 0;    // MonotonicNs of that send
  uint64_t last_send_epoch_ = 0;  // vsocket::WaitEpoch() at that send
  bool detached_ = false;
  int error_ = 0;  // a flush failure the next call reports
  // The socket's inode, recorded when bytes are first held: a Release
  // that runs after the application closed the number (a call still in
  // flight on another thread) must not write into whatever reuses it.
  uint64_t ino_ = 0;
};

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_SEND_CORK_H_
