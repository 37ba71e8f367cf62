// The toe transport: a connection whose peer is an ordinary TCP program,
// carried by a ToeEngine (toe_engine.h) over its kernel TCP socket.
//
// The user's descriptor is the kernel TCP socket itself (the engine has
// kToeKernelSocket): poll/epoll/select, options and addresses are the
// kernel's and exact, because the engine never takes a byte out of the
// socket before the application has it (uring_engine.h).  What the
// transport adds is the engine's data path: receive read-ahead for small
// reads, SEND_ZC for large writes above VSOCKET_TOE_SEND_ZC_MIN, and small
// sends coalesced across calls (send_cork.h, VSOCKET_TOE_CORK): a burst of
// small sends leaves in one system call.  Held bytes go out before any
// other call on the connection, any wait of the process, shutdown, close,
// fork, the move to kernel TCP (exec) and exit(), and from the flusher
// thread 1-2 ms after a quiet sender's burst; SIGKILL loses them (at most
// VSOCKET_TOE_CORK bytes of the last 2 ms).
//
// No kCapKernelStream on purpose: bytes read ahead but undelivered are
// still in the kernel, so the interposer must not splice from the socket
// or hand it to another image behind the transport's back; it calls
// MoveToKernelTcp first (exec into a plain image, stdio), which ends the
// read-ahead and hands the connection to a TcpTransport.
//
// Threading: any thread; the engine serialises per connection.  Blocking
// receives and sends sleep in the kernel (the socket's own O_NONBLOCK,
// SO_RCVTIMEO, SO_SNDTIMEO and signal rules); only a zero-copy send waits
// in poll() itself (stream_io.h rules).
#ifndef VSOCKET_TOE_BACKEND_TOE_TRANSPORT_H_
#define VSOCKET_TOE_BACKEND_TOE_TRANSPORT_H_

#include <memory>

#include "toe_backend/send_cork.h"
#include "toe_backend/uring_engine.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::toe {

inline constexpr TransportKind kToeKind = static_cast<TransportKind>(3);

class ToeTransport final : public Transport, public StreamSteps {
 public:
  // `fd`: the user's established kernel TCP socket (not owned: the socket
  // layer closes it).  `cork_bytes`: VSOCKET_TOE_CORK (0: sends are never
  // held).  REQUIRES: `engine` outlives the transport.
  ToeTransport(UringEngine* engine, int fd, uint32_t cork_bytes);
  ~ToeTransport() override;

  TransportKind kind() const override { return kToeKind; }
  uint32_t capabilities() const override { return 0; }
  FallbackReason fallback_reason() const override { return FallbackReason::kNone; }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  int user_fd() const override { return fd_; }
  int tcp_fd() const override { return fd_; }
  void MoveUserFd(int fd) override;
  // SO_RCVLOWAT is the kernel socket's: with a mark, read-ahead stops for
  // good (Quiesce), so that the kernel's queue, which its poll and recv
  // measure against the mark, holds exactly the undelivered bytes.
  void RecvLowatChanged(uint32_t lowat) override;
  // The child will share the socket: held sends go out, and read-ahead
  // ends in both processes.
  void BeforeFork() override;
  // The child drops its copy of what the parent held (the parent sends it).
  void AfterForkInChild() override;
  bool MoveToKernelTcp(FallbackReason reason) override;
  void Release() override;

  // StreamSteps, for zero-copy sends only (the other calls are the
  // kernel's own blocking calls).
  ssize_t TrySend(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip) override;
  ssize_t TryRecv(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip, bool peek) override;
  int WaitWritable(StreamCall& call) override;
  int WaitReadable(StreamCall& call) override;

 private:
  int SleepUntil(short events, int64_t deadline_ns);

  // A flush error the call reports (-1 with errno), or 0: see SendCork.
  int AfterOtherCall();

  UringEngine* const engine_;
  const ToeHandle handle_;
  int fd_;
  // Null when corking is off.  Shared with the cork list's flushers;
  // replaced only in a forked child before it runs anything else.
  std::shared_ptr<SendCork> cork_;
  std::shared_ptr<SendCork> cork_before_fork_;  // the parent's, in a child
  bool released_ = false;
};

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_TOE_TRANSPORT_H_
