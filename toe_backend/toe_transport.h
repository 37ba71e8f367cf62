// The toe transport: a connection whose peer is an ordinary TCP program,
// carried by a ToeEngine (toe_engine.h) over its kernel TCP socket.
//
// The user's descriptor is the kernel TCP socket itself (the engine has
// kToeKernelSocket): poll/epoll/select, options and addresses are the
// kernel's and exact, because the engine never takes a byte out of the
// socket before the application has it (uring_engine.h).  What the
// transport adds is the engine's data path: receive read-ahead for small
// reads, and SEND_ZC for large writes above VSOCKET_TOE_SEND_ZC_MIN.
// Sends are never held: send() returns once the kernel has the bytes, so
// exit, _exit, exec, fork and SIGKILL lose nothing kernel TCP would not.
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

#include "toe_backend/uring_engine.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::toe {

inline constexpr TransportKind kToeKind = static_cast<TransportKind>(3);

class ToeTransport final : public Transport, public StreamSteps {
 public:
  // `fd`: the user's established kernel TCP socket (not owned: the socket
  // layer closes it).  REQUIRES: `engine` outlives the transport.
  ToeTransport(UringEngine* engine, int fd);
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
  // The child will share the socket: read-ahead ends in both processes.
  void BeforeFork() override;
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

  UringEngine* const engine_;
  const ToeHandle handle_;
  int fd_;
  bool released_ = false;
};

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_TOE_TRANSPORT_H_
