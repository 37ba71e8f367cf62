// Kernel TCP: the fallback transport.  The user's descriptor is the kernel
// socket itself, so every call is the plain system call with the caller's
// flags; blocking, timeouts and readiness are the kernel's.
#ifndef VSOCKET_VSOCKET_TCP_TRANSPORT_H_
#define VSOCKET_VSOCKET_TCP_TRANSPORT_H_

#include "vsocket/transport.h"

namespace vsocket {

class TcpTransport final : public Transport {
 public:
  // Takes no ownership: `fd` is the user's descriptor, closed by the socket
  // layer.
  TcpTransport(int fd, FallbackReason reason) : fd_(fd), reason_(reason) {}

  TransportKind kind() const override { return TransportKind::kTcp; }
  uint32_t capabilities() const override { return kCapKernelStream; }
  FallbackReason fallback_reason() const override { return reason_; }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  int user_fd() const override { return fd_; }
  int tcp_fd() const override { return fd_; }
  void MoveUserFd(int fd) override { fd_ = fd; }
  void Release() override {}

 private:
  int fd_;
  FallbackReason reason_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TCP_TRANSPORT_H_
