// The io_uring engine: kernel TCP sockets driven through per-thread
// io_uring rings (uring_ring.h), implementing ToeEngine (toe_engine.h).
//
// Receive read-ahead without taking bytes from the kernel.  A connection
// whose application reads in small pieces (a request at most a quarter of
// the window, that filled its buffer) switches to read-ahead: one
// io_uring_enter carries "receive into the caller's buffer" linked to
// "MSG_PEEK the next window"; the following small reads are served from
// the window in user memory with no system call; when the window is used
// up, one io_uring_enter carries "discard the window (MSG_TRUNC: no
// copy)" linked to "peek the next one".  A read that drains the socket
// switches the connection back to plain recvmsg (latency: one system call,
// as kernel TCP).
//
// Every undelivered byte stays in the kernel socket, and delivered ones
// are discarded as soon as the window is used up, so the kernel socket's
// readiness, FIONREAD (less what was delivered), close with unread data
// (RST) and inheritance stay exactly the kernel's.  What could differ is a
// second reader of the same socket: a forked child (Quiesce, called by the
// transport before fork, ends read-ahead for good), and an image exec'd
// without the interposer seeing it (posix_spawn): read-ahead runs only on
// close-on-exec descriptors.  The engine holds no send: Send is sendmsg(2)
// (coalescing across calls is the transport's, send_cork.h);
// SendZeroCopy waits for the kernel's notification before returning.
//
// SQPOLL (VSOCKET_TOE_SQPOLL, uring_ring.h): sends and the receives that
// reach the kernel socket go to the SQ thread as non-blocking operations
// too (MSG_DONTWAIT, and MSG_NOSIGNAL: a SIGPIPE would go to the SQ
// thread, so the engine raises it on the caller's thread).  What cannot
// complete at once, for a caller that may block, is the kernel's blocking
// call, so blocking, timeouts and signals stay the kernel's.  Off, every
// call is what it was without SQPOLL.
//
// Readiness: the kernel socket is the descriptor the application polls
// (kToeKernelSocket).
#ifndef VSOCKET_TOE_BACKEND_URING_ENGINE_H_
#define VSOCKET_TOE_BACKEND_URING_ENGINE_H_

#include <atomic>
#include <mutex>
#include <vector>

#include "toe_backend/toe_engine.h"

struct io_uring;

namespace vsocket::toe {

class UringEngine final : public ToeEngine {
 public:
  // `readahead_bytes`: the window per connection (0: no read-ahead);
  // `send_zc_min`: SEND_ZC threshold for SendZeroCopy users (0: never);
  // `inheritable`: read ahead on descriptors without FD_CLOEXEC too.
  UringEngine(uint32_t readahead_bytes, uint64_t send_zc_min,
              bool inheritable = false);

  const char* name() const override { return "io_uring"; }
  uint32_t capabilities() const override;

  ToeHandle Listen(const struct sockaddr* addr, socklen_t len,
                   int backlog) override;
  ToeHandle Accept(ToeHandle listener, struct sockaddr* addr,
                   socklen_t* len) override;
  ToeHandle Connect(const struct sockaddr* addr, socklen_t len) override;
  ToeHandle Adopt(int kernel_fd) override;
  int Shutdown(ToeHandle h, int how) override;
  void Close(ToeHandle h) override;
  void Quiesce(ToeHandle h) override;
  void MoveKernelFd(ToeHandle h, int fd) override;

  ssize_t Recv(ToeHandle h, struct msghdr* msg, int flags) override;
  ssize_t Send(ToeHandle h, const struct msghdr* msg, int flags) override;
  // Up to 8 sendmsg per io_uring_enter on the calling thread's ring
  // (plain sendmsg for one message, or without a ring).
  void SendBatch(const ToeHandle* handles, const struct msghdr* msgs, int n,
                 ssize_t* results) override;
  ssize_t SendZeroCopy(ToeHandle h, const void* data, size_t len, int flags,
                       uint64_t cookie) override;
  int TakeSendDone(uint64_t* cookies, int max) override;
  ssize_t RecvLease(ToeHandle h, size_t max, ToeLease* lease) override;
  int ReleaseLease(ToeHandle h, size_t consumed) override;

  uint32_t Events(ToeHandle h) override;
  int ReadableBytes(ToeHandle h) override;
  int TakeError(ToeHandle h) override;
  int Poll(int budget) override { (void)budget; return 0; }
  int wait_fd() const override { return -1; }
  int kernel_fd(ToeHandle h) const override;

  // Whether SendZeroCopy should be used for a send of `len` bytes.
  bool WantsZeroCopy(size_t len) const;

  // What the read-ahead did, for tests and the benchmarks' reports.
  struct Counters {
    std::atomic<uint64_t> readahead_enters{0};  // io_uring_enter calls that peeked
    std::atomic<uint64_t> window_bytes{0};      // bytes served from a window
    std::atomic<uint64_t> zerocopy_sends{0};    // SEND_ZC submissions
    std::atomic<uint64_t> sqpoll_calls{0};      // Send/Recv the SQ thread ran
    std::atomic<uint64_t> batch_enters{0};      // SendBatch io_uring_enters (>= 2 sends)
  };
  const Counters& counters() const { return counters_; }

 private:
  struct Socket;
  static Socket* Of(ToeHandle h) { return reinterpret_cast<Socket*>(h); }
  ToeHandle Make(int fd, bool owned);

  // All REQUIRE s.mu held.
  // *faulted is set (and 0 returned, nothing delivered) when the caller's
  // buffers fault.
  size_t CopyFromWindow(Socket& s, struct msghdr* msg, size_t skip, bool peek,
                        bool* faulted);
  void RefillWindow(Socket& s);
  ssize_t ReceiveAndPeek(Socket& s, struct msghdr* msg, int flags);
  void DropWindow(Socket& s);
  bool MayReadAhead(Socket& s);
  void NotePeek(Socket& s, bool found);
  // SQPOLL: a non-blocking recvmsg run by the SQ thread for the calling
  // thread's ring.  False when the kernel socket must answer instead (no
  // SQPOLL ring on this thread, or nothing there for a caller that may
  // block); else *n is the result.
  bool RecvOnSqThread(Socket& s, struct msghdr* msg, int flags, ssize_t* n);

  // SQPOLL: Send through `ring`, the calling thread's.  No lock: sends are
  // serialised by the kernel socket, as sendmsg(2).
  ssize_t SendOnSqThread(Socket& s, struct io_uring* ring,
                         const struct msghdr* msg, int flags);

  const uint32_t window_bytes_;
  const uint64_t send_zc_min_;
  const bool inheritable_;
  std::mutex done_mu_;
  std::vector<uint64_t> send_done_;  // cookies for TakeSendDone
  Counters counters_;
};

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_URING_ENGINE_H_
