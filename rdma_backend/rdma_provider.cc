#include "rdma_backend/rdma_provider.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <cstring>

#include "rdma_backend/rdma_acceptor.h"
#include "rdma_backend/rdma_config.h"
#include "rdma_backend/rdma_negotiation.h"
#include "rdma_backend/rdma_transport.h"
#include "vsocket/local_port.h"
#include "vsocket/log.h"
#include "base/real_libc.h"
#include "vsocket/user_descriptor.h"

namespace vsocket::rdma {
namespace {

// Client: an established channel waiting for its kernel TCP twin.
class RdmaPendingConnection final : public PendingConnection {
 public:
  explicit RdmaPendingConnection(std::unique_ptr<RdmaChannel> channel)
      : channel_(std::move(channel)) {}
  // Never paired with its socket (the kernel connect failed or did not
  // finish): abort it, so that the server's parked copy is reset and its
  // accept() stays on TCP.
  ~RdmaPendingConnection() override {
    if (channel_) channel_->Abort();
  }

  // The peer's CM just answered: its TCP listener is a round trip away.
  int handshake_wait_ms() const override {
    return static_cast<int>(GetRdmaConfig().probe_ms);
  }

  std::unique_ptr<Transport> Complete(int fd, FallbackReason* reason) override {
    *reason = FallbackReason::kRdmaSetupFailed;
    int tcp_fd = DuplicateAside(fd);
    if (tcp_fd < 0) return nullptr;
    std::unique_ptr<RdmaTransport> transport =
        RdmaTransport::Create(std::move(channel_), tcp_fd);
    if (!transport) {
      VSOCKET_LOG(kWarn, "rdma transport setup failed: %s", strerror(errno));
      sys::close(tcp_fd);
      return nullptr;
    }
    // The application keeps its number; it now names the readiness socket.
    if (InstallAtUserNumber(transport->user_fd(), fd) != 0) {
      return nullptr;  // Release() closes the channel and tcp_fd
    }
    transport->MoveUserFd(fd);
    *reason = FallbackReason::kNone;
    return transport;
  }

 private:
  std::unique_ptr<RdmaChannel> channel_;
};

// Server: the RDMA CM listener beside one kernel listener.
class RdmaListenerAttachment final : public ListenerAttachment {
 public:
  explicit RdmaListenerAttachment(int handle) : handle_(handle) {}
  ~RdmaListenerAttachment() override { StopRdmaListener(handle_); }

  std::unique_ptr<Transport> Claim(int accepted_fd, ConnectionEndpoints* ends,
                                   Decline* decline) override {
    (void)ends;  // unused: ClaimRdmaChannel asks getpeername itself
    FallbackReason reason = FallbackReason::kPeerNotVsocket;
    std::unique_ptr<Transport> t = ClaimRdmaChannel(handle_, accepted_fd, &reason);
    // peer_not_vsocket: the client announced no channel here.
    *decline = {reason, reason != FallbackReason::kPeerNotVsocket};
    return t;
  }

 private:
  const int handle_;
};

// The IPv4 destination of `addr` (IPv4-mapped IPv6 included).
bool Ipv4Destination(const struct sockaddr* addr, socklen_t len,
                     struct sockaddr_in* dst) {
  *dst = {};
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    *dst = *reinterpret_cast<const sockaddr_in*>(addr);
    return true;
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return false;
    dst->sin_family = AF_INET;
    dst->sin_port = in6->sin6_port;
    std::memcpy(&dst->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
    return true;
  }
  return false;
}

class RdmaTransportProvider final : public TransportProvider {
 public:
  const char* name() const override { return "rdma"; }
  TransportKind kind() const override { return kRdmaKind; }
  uint32_t capabilities() const override {
    return kCapZeroCopySend | kCapInPlaceRecv | kCapUserSpaceReadiness;
  }

  Decline Offer(int fd, const struct sockaddr* addr, socklen_t len,
                const OfferOptions& options,
                std::unique_ptr<PendingConnection>* pending) override {
    const bool forced = options.forced;
    struct sockaddr_in dst;
    if (!Ipv4Destination(addr, len, &dst)) {
      // The negotiation is IPv4 only.
      return {forced ? FallbackReason::kNoRdmaDevice : FallbackReason::kPeerNotLocal,
              false};
    }
    if (!HaveRdmaDevice()) return {FallbackReason::kNoRdmaDevice, true};
    uint16_t port = EnsureLocalPort(fd, addr->sa_family);
    if (port == 0) return {FallbackReason::kLocalPortsBusy, true};
    std::unique_ptr<RdmaChannel> channel;
    FallbackReason reason = ProbeRdmaPeer(dst, port, &channel);
    if (reason != FallbackReason::kNone) return {reason, true};
    *pending = std::make_unique<RdmaPendingConnection>(std::move(channel));
    return {FallbackReason::kNone, true};
  }

  // Before the kernel listen() when the socket is bound (clients that find
  // the TCP port open must find the RDMA one too), else just after it.
  std::unique_ptr<ListenerAttachment> AttachListener(int listen_fd,
                                                     bool) override {
    int handle = StartRdmaListener(listen_fd);
    if (handle < 0) return nullptr;
    return std::make_unique<RdmaListenerAttachment>(handle);
  }

  void BeforeKernelWait() override { RdmaTransport::ArmDeferred(); }
  void FlushHeldBack() override { RdmaTransport::FlushCorked(); }
};

}  // namespace

TransportProvider* RdmaProvider() {
  static RdmaTransportProvider* provider = new RdmaTransportProvider();
  return provider;
}

}  // namespace vsocket::rdma
