// Kernel TCP: the fallback transport.  The user's descriptor is the kernel
// socket itself, so every call is the plain system call with the caller's
// flags; blocking, timeouts and readiness are the kernel's.
#ifndef VSOCKET_VSOCKET_TCP_TRANSPORT_H_
#define VSOCKET_VSOCKET_TCP_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "vsocket/transport.h"

namespace vsocket {

class TcpTransport final : public Transport {
 public:
  // Takes no ownership: `fd` is the user's descriptor, closed by the socket
  // layer.
  TcpTransport(int fd, FallbackReason reason) : fd_(fd), reason_(reason) {}
  // The successor of a transport that has just put the TCP socket at the
  // user's number `fd` with dup3 (a fallback).  A poll or select that was
  // asleep on the old file at that moment was woken on purpose and reports
  // the number readable; DropStaleWakeup() then asks the TCP socket.
  // `pending_error` (0: none) is a socket error the predecessor took from
  // the kernel (a look at the TCP socket, a resend) before the program
  // saw it: it is reported once, as the kernel's sock_error() would have,
  // by the next send, by a receive that finds nothing queued, or SO_ERROR.
  static std::unique_ptr<TcpTransport> AfterSwap(int fd, FallbackReason reason,
                                                 int pending_error = 0);

  TransportKind kind() const override { return TransportKind::kTcp; }
  uint32_t capabilities() const override { return kCapKernelStream; }
  FallbackReason fallback_reason() const override { return reason_; }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  // Right after a swap (AfterSwap), true when the TCP socket has nothing
  // to read: a waiter woken on the old file must not block in read().
  bool DropStaleWakeup() override;
  int user_fd() const override { return fd_; }
  int tcp_fd() const override { return fd_; }
  void MoveUserFd(int fd) override { fd_ = fd; }
  void Release() override {}

 private:
  int fd_;
  FallbackReason reason_;
  int64_t swapped_at_ns_ = 0;  // AfterSwap's time; 0: never swapped
  std::atomic<int> pending_error_{0};  // see AfterSwap; any thread takes it
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TCP_TRANSPORT_H_
