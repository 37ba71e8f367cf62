#include "vsocket/path_selection.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>

#include "vsocket/real_libc.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/rendezvous.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/shm_transport.h"
#include "vsocket/config.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"
#if VSOCKET_HAVE_RDMA
#include "rdma_backend/rdma_acceptor.h"
#include "rdma_backend/rdma_negotiation.h"
#include "rdma_backend/rdma_transport.h"
#endif

namespace vsocket {

struct RdmaPending {
#if VSOCKET_HAVE_RDMA
  // A pending channel that is destroyed was never paired with its socket
  // (the kernel connect failed or did not finish): abort it, so that the
  // server's parked copy is reset and its accept() stays on TCP.
  ~RdmaPending() {
    if (channel) channel->Abort();
  }
  std::unique_ptr<rdma::RdmaChannel> channel;
#endif
};

using fifo::Doorbell;
using fifo::Endpoint;
using fifo::ShmSegment;
using fifo::ShmTransport;

PendingOffer::PendingOffer() = default;
PendingOffer::PendingOffer(PendingOffer&&) noexcept = default;
PendingOffer& PendingOffer::operator=(PendingOffer&&) noexcept = default;
PendingOffer::~PendingOffer() {
  if (segment) segment->Unlink();
}

namespace {

FallbackReason ReasonForSetupError(int err) {
  return err == -EADDRINUSE ? FallbackReason::kRendezvousNameInUse
                            : FallbackReason::kShmSetupFailed;
}

// The key needs the client's port before the SYN: bind an ephemeral one if
// the application did not bind.  Returns the port or 0.
uint16_t EnsureLocalPort(int fd, int family) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&ss), &len) != 0)
    return 0;
  Endpoint local;
  if (!fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&ss), len,
                                  &local)) {
    return 0;
  }
  if (local.port != 0) return local.port;
  struct sockaddr_storage any {};
  socklen_t any_len;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<struct sockaddr_in6*>(&any);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    any_len = sizeof(*in6);
  } else {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&any);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    any_len = sizeof(*in);
  }
  if (sys::bind(fd, reinterpret_cast<struct sockaddr*>(&any), any_len) != 0)
    return 0;
  len = sizeof(ss);
  if (sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&ss), &len) != 0 ||
      !fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&ss), len,
                                  &local)) {
    return 0;
  }
  return local.port;
}

}  // namespace

namespace {

// The RDMA attempt (see PrepareOffer).  `no_path` is the reason when RDMA
// cannot even be tried for this address.
FallbackReason PrepareRdmaOffer(int fd, const struct sockaddr* addr,
                                socklen_t len, FallbackReason no_path,
                                PendingOffer* offer) {
#if VSOCKET_HAVE_RDMA
  struct sockaddr_in dst = {};
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    dst = *reinterpret_cast<const sockaddr_in*>(addr);
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6) &&
             IN6_IS_ADDR_V4MAPPED(
                 &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    dst.sin_family = AF_INET;
    dst.sin_port = in6->sin6_port;
    std::memcpy(&dst.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
  } else {
    return no_path;  // the negotiation is IPv4 only
  }
  if (!rdma::HaveRdmaDevice()) return FallbackReason::kNoRdmaDevice;
  uint16_t port = EnsureLocalPort(fd, addr->sa_family);
  if (port == 0) return FallbackReason::kRdmaSetupFailed;
  auto pending = std::make_unique<RdmaPending>();
  FallbackReason reason = rdma::ProbeRdmaPeer(dst, port, &pending->channel);
  if (reason == FallbackReason::kNone) offer->rdma = std::move(pending);
  return reason;
#else
  (void)fd;
  (void)addr;
  (void)len;
  (void)offer;
  return no_path;
#endif
}

}  // namespace

FallbackReason PrepareOffer(int fd, const struct sockaddr* addr,
                            socklen_t len, PendingOffer* offer) {
  const Config& config = GetConfig();
  if (config.policy == TransportPolicy::kTcp)
    return FallbackReason::kDisabledByConfig;
  if (config.policy == TransportPolicy::kRdma) {
    return PrepareRdmaOffer(fd, addr, len, FallbackReason::kNoRdmaDevice,
                            offer);
  }
  Endpoint dst;
  if (!fifo::EndpointFromSockaddr(addr, len, &dst))
    return FallbackReason::kPeerNotVsocket;
  if (dst.ip == "*") dst.ip = addr->sa_family == AF_INET6 ? "::1" : "127.0.0.1";
  if (!fifo::IsLocalAddress(dst, addr->sa_family)) {
    if (config.policy == TransportPolicy::kAuto) {
      return PrepareRdmaOffer(fd, addr, len, FallbackReason::kPeerNotLocal,
                              offer);
    }
    return FallbackReason::kPeerNotLocal;
  }
  fifo::ProbeResult probe = fifo::ProbeListener(dst);
  if (!probe.found) return FallbackReason::kPeerNotVsocket;
  if (probe.uid != ::geteuid()) return FallbackReason::kUidMismatch;

  int family = addr->sa_family;
  uint16_t port = EnsureLocalPort(fd, family);
  if (port == 0) return FallbackReason::kShmSetupFailed;
  std::string key = fifo::ConnectionKey(dst, port);
  PendingOffer made;
  int err = ShmSegment::CreateOffer(key, config.ring_bytes, &made.segment);
  if (err != 0) {
    VSOCKET_LOG(kDebug, "offer %s: segment: %s", key.c_str(), strerror(-err));
    return ReasonForSetupError(err);
  }
  made.doorbell = std::make_unique<Doorbell>();
  err = made.doorbell->Open(key, 'c', 's');
  if (err != 0) {
    VSOCKET_LOG(kDebug, "offer %s: doorbell: %s", key.c_str(), strerror(-err));
    return ReasonForSetupError(err);
  }
  *offer = std::move(made);
  return FallbackReason::kNone;
}

namespace {

std::unique_ptr<Transport> CompleteRdmaOffer(int fd, PendingOffer offer) {
#if VSOCKET_HAVE_RDMA
  int fd_flags = sys::fcntl(fd, F_GETFD);
  int tcp_fd = sys::DupPrivate(fd);
  if (tcp_fd < 0) tcp_fd = sys::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (tcp_fd < 0) return nullptr;
  std::unique_ptr<rdma::RdmaTransport> transport =
      rdma::RdmaTransport::Create(std::move(offer.rdma->channel), tcp_fd);
  if (!transport) {
    VSOCKET_LOG(kWarn, "rdma transport setup failed: %s", strerror(errno));
    sys::close(tcp_fd);
    return nullptr;
  }
  // The application keeps its descriptor number; it now names the
  // readiness socket, whose state follows the channel.
  int user_fd = transport->user_fd();
  if (sys::dup3(user_fd, fd, (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
    VSOCKET_LOG(kWarn, "dup3 failed: %s", strerror(errno));
    return nullptr;  // Release() closes the channel and tcp_fd
  }
  transport->MoveUserFd(fd);
  sys::close(user_fd);
  return transport;
#else
  (void)fd;
  (void)offer;
  return nullptr;
#endif
}

}  // namespace

std::unique_ptr<Transport> CompleteOffer(int fd, PendingOffer offer) {
  if (offer.is_rdma()) return CompleteRdmaOffer(fd, std::move(offer));
  int fd_flags = sys::fcntl(fd, F_GETFD);
  int liveness_fd = sys::DupPrivate(fd);
  if (liveness_fd < 0) liveness_fd = sys::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (liveness_fd < 0) return nullptr;
  int64_t deadline =
      MonotonicNs() + int64_t{GetConfig().claim_timeout_ms} * 1000000;
  int wait_fd = offer.doorbell->wait_fd();
  auto transport = ShmTransport::Create(
      ShmTransport::Role::kClient, std::move(offer.segment),
      std::move(offer.doorbell), liveness_fd, deadline);
  if (!transport) {
    sys::close(liveness_fd);
    return nullptr;
  }
  // The application keeps its descriptor number; it now names the wait
  // socket, whose readiness follows the rings.
  if (sys::dup3(wait_fd, fd, (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
    VSOCKET_LOG(kWarn, "dup3 failed: %s", strerror(errno));
    return nullptr;  // the transport's destructor closes what it owns
  }
  sys::close(wait_fd);
  transport->set_user_fd(fd);
  return transport;
}

std::unique_ptr<Transport> ClaimOffer(int accepted_fd, FallbackReason* reason) {
  struct sockaddr_storage local_ss, peer_ss;
  socklen_t local_len = sizeof(local_ss), peer_len = sizeof(peer_ss);
  Endpoint local, peer;
  if (sys::getsockname(accepted_fd, reinterpret_cast<struct sockaddr*>(&local_ss),
                    &local_len) != 0 ||
      sys::getpeername(accepted_fd, reinterpret_cast<struct sockaddr*>(&peer_ss),
                    &peer_len) != 0 ||
      !fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&local_ss),
                                  local_len, &local) ||
      !fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&peer_ss),
                                  peer_len, &peer)) {
    *reason = FallbackReason::kPeerNotVsocket;
    return nullptr;
  }
  std::string key = fifo::ConnectionKey(local, peer.port);
  std::unique_ptr<ShmSegment> segment;
  int err = ShmSegment::OpenOffer(key, &segment);
  if (err != 0) {
    if (err == -ENOENT) {
      *reason = FallbackReason::kPeerNotVsocket;
    } else {
      VSOCKET_LOG(kWarn, "rejecting the offer %s: %s", key.c_str(),
                  strerror(-err));
      *reason = FallbackReason::kInvalidOffer;
    }
    return nullptr;
  }
  auto doorbell = std::make_unique<Doorbell>();
  err = doorbell->Open(key, 's', 'c');
  fifo::SegmentHeader* header = segment->header();
  if (err != 0) {
    // Tell the client at once rather than letting its offer time out.
    uint32_t offered = fifo::kOffered;
    header->claim.compare_exchange_strong(offered, fifo::kRevoked);
    *reason = ReasonForSetupError(err);
    return nullptr;
  }
  header->server_pid = static_cast<uint32_t>(::getpid());
  uint32_t expected = fifo::kOffered;
  if (!header->claim.compare_exchange_strong(expected, fifo::kClaimed,
                                             std::memory_order_seq_cst)) {
    *reason = FallbackReason::kOfferRevoked;
    return nullptr;
  }
  segment->Unlink();
  // The liveness socket becomes private: move it out of the program's range.
  int tcp_fd = sys::DupPrivate(accepted_fd);
  bool moved = tcp_fd >= 0;
  if (!moved) tcp_fd = accepted_fd;
  auto transport = ShmTransport::Create(ShmTransport::Role::kServer,
                                        std::move(segment), std::move(doorbell),
                                        tcp_fd, 0);
  if (!transport) {
    if (moved) sys::close(tcp_fd);
    *reason = FallbackReason::kShmSetupFailed;
    return nullptr;
  }
  if (moved) sys::close(accepted_fd);
  transport->AfterClaim();
  *reason = FallbackReason::kNone;
  return transport;
}

int OpenMarkerFor(int listen_fd) {
  if (GetConfig().policy == TransportPolicy::kTcp) return -1;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  Endpoint bound;
  if (sys::getsockname(listen_fd, reinterpret_cast<struct sockaddr*>(&ss), &len) != 0 ||
      !fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&ss), len,
                                  &bound)) {
    return -1;
  }
  int fd = fifo::OpenListenerMarker(bound);
  if (fd < 0) {
    VSOCKET_LOG(kDebug, "no listener marker for port %u: %s", bound.port,
                strerror(-fd));
    return -1;
  }
  return fd;
}

}  // namespace vsocket

namespace vsocket {

int StartRdmaListening(int listen_fd) {
#if VSOCKET_HAVE_RDMA
  return rdma::StartRdmaListener(listen_fd);
#else
  (void)listen_fd;
  return -1;
#endif
}

void StopRdmaListening(int handle) {
#if VSOCKET_HAVE_RDMA
  rdma::StopRdmaListener(handle);
#else
  (void)handle;
#endif
}

std::unique_ptr<Transport> ClaimRdma(int rdma_handle, int accepted_fd,
                                     FallbackReason* reason) {
#if VSOCKET_HAVE_RDMA
  return rdma::ClaimRdmaChannel(rdma_handle, accepted_fd, reason);
#else
  (void)rdma_handle;
  (void)accepted_fd;
  *reason = FallbackReason::kPeerNotVsocket;
  return nullptr;
#endif
}

int HandshakeWaitMs(const PendingOffer& offer) {
  return offer.is_rdma() ? static_cast<int>(GetConfig().rdma_probe_ms) : 5;
}

}  // namespace vsocket
