// The TCP offload engine interface: what toe_backend/ToeTransport needs from
// an engine that runs TCP for it.  The io_uring engine over kernel sockets
// (uring_engine.h) implements it; a hardware TOE, F-Stack or a
// TCPDirect-like library could too (toe_backend/README.md maps them).
//
// Contract for engines:
//  - Every call is non-blocking and returns -errno on failure (the errno
//    kernel TCP would give), except where a call says otherwise for
//    engines with kToeKernelSocket.  SIGPIPE: Send without MSG_NOSIGNAL
//    raises it on EPIPE as the kernel does; SendZeroCopy never does (the
//    caller, on -EPIPE).
//  - Handles are the engine's: it makes them (Listen, Accept, Connect,
//    Adopt) and frees them (Close, Detach).  A handle is never 0.
//  - Progress: an engine that needs it is driven by Poll(budget) and
//    sleeps on wait_fd(); an engine whose work completes inside each call
//    (the io_uring engine) returns 0 and -1 there.
//  - Thread-safety: any thread may call any method, for one handle at a
//    time or concurrently; the engine serialises per handle itself.
#ifndef VSOCKET_TOE_BACKEND_TOE_ENGINE_H_
#define VSOCKET_TOE_BACKEND_TOE_ENGINE_H_

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace vsocket::toe {

// An engine's connection or listener.  Positive; 0 is "none".
using ToeHandle = int64_t;

// What an engine can do (ToeEngine::capabilities()).
enum ToeCapability : uint32_t {
  // Each handle wraps a kernel TCP socket (kernel_fd()), whose poll()
  // readiness, options and addresses stay exact at every moment: bytes the
  // engine read ahead are still in that socket until delivered.  Calls
  // without MSG_DONTWAIT may then block as that socket would (the kernel's
  // SO_RCVTIMEO, SO_SNDTIMEO and signal rules).
  kToeKernelSocket = 1u << 0,
  // Recv may serve bytes read ahead by one kernel entry that carried
  // several operations (batching).
  kToeReadAhead = 1u << 1,
  // SendZeroCopy sends from the caller's memory without a CPU copy.
  kToeSendZeroCopy = 1u << 2,
  // RecvLease shows received bytes where the engine holds them.
  kToeRecvLease = 1u << 3,
};

// Per-handle readiness (ToeEngine::Events), as poll() would see it.
enum ToeEvent : uint32_t {
  kToeReadable = 1u << 0,    // Recv would not return -EAGAIN
  kToeWritable = 1u << 1,    // Send would take at least one byte
  kToeReadHangup = 1u << 2,  // the peer finished sending
  kToeError = 1u << 3,       // a pending error (reset, refused)
};

// A zero-copy receive: `len` bytes at `data`, valid until ReleaseLease.
struct ToeLease {
  const void* data = nullptr;
  size_t len = 0;
};

class ToeEngine {
 public:
  virtual ~ToeEngine() = default;

  virtual const char* name() const = 0;
  virtual uint32_t capabilities() const = 0;  // ToeCapability bits

  // ---- Connections ----
  // A listening handle on `addr`.  Returns the handle or -errno.
  virtual ToeHandle Listen(const struct sockaddr* addr, socklen_t len,
                           int backlog) = 0;
  // The next established connection of `listener` (its peer address in
  // *addr/*len when given), or -EAGAIN.
  virtual ToeHandle Accept(ToeHandle listener, struct sockaddr* addr,
                           socklen_t* len) = 0;
  // Starts a connection; it is established once Events() shows
  // kToeWritable (kToeError: it failed; TakeError says why).
  virtual ToeHandle Connect(const struct sockaddr* addr, socklen_t len) = 0;
  // kToeKernelSocket engines: takes over the data path of an established
  // kernel TCP connection that stays owned by the caller (Detach gives it
  // back, Close does not close it).  Others: -EOPNOTSUPP.
  virtual ToeHandle Adopt(int kernel_fd) = 0;
  // shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR.  0 or -errno.
  virtual int Shutdown(ToeHandle h, int how) = 0;
  // Frees `h`; closes the connection it made (never an adopted one): FIN,
  // or RST when unread bytes remain, as close(2).
  virtual void Close(ToeHandle h) = 0;
  // kToeKernelSocket engines: from now on the kernel socket alone holds
  // the stream (every byte read ahead but not delivered is back in it, no
  // delivered byte is), and the engine reads ahead no more on `h`, though
  // it keeps serving calls (a connection now shared with another process).
  virtual void Quiesce(ToeHandle h) = 0;

  // kToeKernelSocket engines: the caller's descriptor number for the
  // adopted socket of `h` changed to `fd` (a duplicate of the same file).
  virtual void MoveKernelFd(ToeHandle h, int fd) = 0;

  // ---- Data ----
  // recvmsg(2) into msg's iovecs with MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT,
  // MSG_OOB as the kernel.  Returns bytes, 0 at end of stream, or -errno.
  // Sets the msghdr's output fields as kernel TCP does.
  virtual ssize_t Recv(ToeHandle h, struct msghdr* msg, int flags) = 0;
  // sendmsg(2): bytes taken (all copied into the engine or the kernel
  // before it returns: nothing of the caller's stays referenced), or -errno.
  virtual ssize_t Send(ToeHandle h, const struct msghdr* msg, int flags) = 0;
  // Sends msgs[i] on handles[i] for i < n, each without blocking or
  // SIGPIPE (MSG_DONTWAIT | MSG_NOSIGNAL); results[i] is what Send would
  // return.  For flushing many connections' coalesced sends at once: an
  // engine that can batches them (io_uring: one io_uring_enter per ring's
  // worth); this default sends one at a time.
  virtual void SendBatch(const ToeHandle* handles, const struct msghdr* msgs,
                         int n, ssize_t* results) {
    for (int i = 0; i < n; ++i)
      results[i] = Send(handles[i], &msgs[i], MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  // Sends from the caller's memory; the engine reads `data` until it
  // reports `cookie` through TakeSendDone.  Bytes taken, or -errno
  // (-EOPNOTSUPP without kToeSendZeroCopy).
  virtual ssize_t SendZeroCopy(ToeHandle h, const void* data, size_t len,
                               int flags, uint64_t cookie) = 0;
  // Cookies of zero-copy sends whose memory the engine no longer reads,
  // up to `max` of them; returns how many.
  virtual int TakeSendDone(uint64_t* cookies, int max) = 0;
  // Up to `max` unread bytes where the engine holds them, without
  // consuming them; -EAGAIN when none; 0 at end of stream.
  // -EOPNOTSUPP without kToeRecvLease.
  virtual ssize_t RecvLease(ToeHandle h, size_t max, ToeLease* lease) = 0;
  // Ends the lease, consuming its first `consumed` bytes.  0 or -errno.
  virtual int ReleaseLease(ToeHandle h, size_t consumed) = 0;

  // ---- Readiness ----
  virtual uint32_t Events(ToeHandle h) = 0;  // ToeEvent bits
  // Bytes Recv would return now without blocking (FIONREAD), or -errno.
  virtual int ReadableBytes(ToeHandle h) = 0;
  // The pending error (SO_ERROR), cleared; 0 if none.
  virtual int TakeError(ToeHandle h) = 0;
  // Runs up to `budget` units of deferred work; returns how many ran.
  virtual int Poll(int budget) = 0;
  // A descriptor that is readable when Poll has work; -1 when there is
  // never any (each call finishes its own work).
  virtual int wait_fd() const = 0;
  // kToeKernelSocket engines: the kernel socket of `h`; others -1.
  virtual int kernel_fd(ToeHandle h) const = 0;
};

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_TOE_ENGINE_H_
