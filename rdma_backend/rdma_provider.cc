#include "rdma_backend/rdma_provider.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <cstring>

#include "rdma_backend/rdma_acceptor.h"
#include "rdma_backend/rdma_config.h"
#include "rdma_backend/rdma_reasons.h"
#include "rdma_backend/rdma_negotiation.h"
#include "rdma_backend/rdma_transport.h"
#include "rdma_backend/readiness_socket.h"
#include "vsocket/local_port.h"
#include "vsocket/log.h"
#include "base/real_libc.h"

namespace vsocket::rdma {
namespace {

// Client: a connection built before the kernel connect, waiting for it.
// Everything that can fail is done before the SYN leaves: once it has, the
// server may claim the channel, and a client that fell back to TCP then
// would write to a server that reads only RDMA (CI, stop 27).
class RdmaPendingConnection final : public PendingConnection {
 public:
  // Destroying it unpaired (the kernel connect failed or did not finish)
  // resets the channel, so that the server's parked copy is reset too and
  // its accept() stays on TCP (RdmaTransport::Release).
  explicit RdmaPendingConnection(std::unique_ptr<RdmaTransport> transport)
      : transport_(std::move(transport)) {}

  // The peer's CM just answered: its TCP listener is a round trip away.
  int handshake_wait_ms() const override {
    return static_cast<int>(GetRdmaConfig().probe_ms);
  }

  // The application keeps its number; it now names the readiness socket.
  // Makes no descriptor, so it does not run out of them.
  std::unique_ptr<Transport> Complete(int fd, FallbackReason* reason) override {
    if (transport_->TakeOverNumber(fd) != 0) {
      *reason = RdmaReason().rdma_setup_failed;
      return nullptr;  // the destructor resets the channel
    }
    *reason = FallbackReason::kNone;
    return std::move(transport_);
  }

 private:
  std::unique_ptr<RdmaTransport> transport_;
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

  // New clients still get RDMA here (the receiver may be preloaded too);
  // what changes is how long an unclaimed channel may wait.
  void PassedOut() override { NoteRdmaListenerPassedOut(handle_); }

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
      return {forced ? RdmaReason().no_rdma_device : FallbackReason::kPeerNotLocal,
              false};
    }
    if (!HaveRdmaDevice()) return {RdmaReason().no_rdma_device, true};
    uint16_t port = EnsureLocalPort(fd, addr->sa_family);
    if (port == 0) return {FallbackReason::kLocalPortsBusy, true};
    // The descriptors first: short of them, the server hears nothing.
    auto ready = std::make_unique<ReadinessSocket>();
    if (int err = ready->Open(); err != 0) {
      VSOCKET_LOG(kInfo, "rdma: no descriptors for a connection: %s", strerror(-err));
      return {err == -EMFILE || err == -ENFILE ? FallbackReason::kFdLimit
                                               : RdmaReason().rdma_setup_failed,
              true};
    }
    std::unique_ptr<RdmaChannel> channel;
    FallbackReason reason = ProbeRdmaPeer(dst, port, &channel);
    if (reason != FallbackReason::kNone) return {reason, true};
    std::unique_ptr<RdmaTransport> transport =
        RdmaTransport::Create(std::move(channel), std::move(ready));
    if (!transport) {  // the channel was reset
      VSOCKET_LOG(kWarn, "rdma transport setup failed: %s", strerror(errno));
      return {RdmaReason().rdma_setup_failed, true};
    }
    *pending = std::make_unique<RdmaPendingConnection>(std::move(transport));
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
  static RdmaTransportProvider* provider = [] {
    RdmaReason();  // registered before the live page names the reasons
    return new RdmaTransportProvider();
  }();
  return provider;
}

}  // namespace vsocket::rdma
