#include "fifo_bridge/shm_provider.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/process_id.h"
#include "base/private_fd.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/offer_hand_out.h"
#include "fifo_bridge/rendezvous.h"
#include "fifo_bridge/sharing_policy.h"
#include "fifo_bridge/shm_config.h"
#include "fifo_bridge/shm_reasons.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/shm_transport.h"
#include "vsocket/config.h"
#include "vsocket/descriptor_number.h"
#include "vsocket/local_port.h"
#include "vsocket/log.h"
#include "base/real_libc.h"
#include "vsocket/user_descriptor.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {
namespace {

FallbackReason ReasonForSetupError(int err) {
  if (err == -EMFILE || err == -ENFILE) return FallbackReason::kFdLimit;
  return err == -EADDRINUSE ? ShmReason().rendezvous_name_in_use
                            : ShmReason().shm_setup_failed;
}

// Client: an unclaimed offer between the probe and the connect.
class ShmPendingConnection final : public PendingConnection {
 public:
  // `listener_pid`: the process that listens (the marker's SO_PEERCRED).
  ShmPendingConnection(std::unique_ptr<ShmSegment> segment,
                       std::unique_ptr<Doorbell> doorbell,
                       DescriptorReservation descriptors,
                       std::unique_ptr<OfferHandOut> hand_out, pid_t listener_pid)
      : segment_(std::move(segment)),
        doorbell_(std::move(doorbell)),
        descriptors_(std::move(descriptors)),
        hand_out_(std::move(hand_out)),
        listener_pid_(listener_pid),
        offer_made_ns_(MonotonicNs()) {}
  // A withdrawn offer: the server's claim finds no segment (TCP).
  ~ShmPendingConnection() override {
    if (segment_) segment_->Unlink();
  }

  // A local listener accepts within microseconds unless its backlog is full.
  int handshake_wait_ms() const override { return 5; }

  std::unique_ptr<Transport> Complete(int fd, FallbackReason* reason) override {
    *reason = ShmReason().shm_setup_failed;
    int liveness_fd = DuplicateAside(fd);
    if (liveness_fd < 0) {
      if (errno == EMFILE || errno == ENFILE) *reason = FallbackReason::kFdLimit;
      return nullptr;
    }
    int wait_fd = doorbell_->wait_fd();
    auto transport = ShmTransport::Create(
        ShmTransport::Role::kClient, std::move(segment_), std::move(doorbell_),
        liveness_fd, offer_made_ns_);
    if (!transport) {
      if (errno == EMFILE || errno == ENFILE) *reason = FallbackReason::kFdLimit;
      sys::close(liveness_fd);
      return nullptr;
    }
    transport->HoldDescriptors(std::move(descriptors_));
    if (InstallAtUserNumber(wait_fd, fd) != 0) {
      // The destructor frees the side state, segment, doorbell and budget;
      // the liveness duplicate is closed only by Release(): close it here.
      transport.reset();
      sys::close(liveness_fd);
      return nullptr;
    }
    transport->set_user_fd(fd);
    if (hand_out_) transport->KeepOfferHandOut(std::move(hand_out_));
    transport->set_listener_pid(listener_pid_);
    transport->StartWatching();
    *reason = FallbackReason::kNone;
    return transport;
  }

 private:
  std::unique_ptr<ShmSegment> segment_;
  std::unique_ptr<Doorbell> doorbell_;
  DescriptorReservation descriptors_;
  std::unique_ptr<OfferHandOut> hand_out_;  // sealed offers only
  pid_t listener_pid_;
  int64_t offer_made_ns_;  // MonotonicNs when the offer was made
};

// How long accept() waits for a client's watcher thread to hand its sealed
// offer over: microseconds when the client runs; a stopped or hostile
// client holds this accept() up to this long, then is declined.
constexpr int kHandOutWaitMs = 1000;

// Server: the listener marker beside one listening socket.
// The marker tells clients the uid of the process that listened; a process
// that accepts under another uid (nginx's workers) cannot open the offers
// made to that uid, so it declines each at once.
// Without a marker of its own (marker_fd -1) it only claims: another
// process holds the marker of the same address (a listener received in an
// SCM_RIGHTS message whose sender kept its copy, or an SO_REUSEPORT
// sibling), and clients offer to that marker's uid, `marker_uid`.
class ShmListener final : public ListenerAttachment {
 public:
  ShmListener(int marker_fd, uid_t marker_uid)
      : marker_fd_(marker_fd), marker_uid_(marker_uid) {}
  ~ShmListener() override {
    if (marker_fd_ >= 0) sys::close(marker_fd_);
  }
  // -1 once passed out.
  int marker_fd() const {
    std::lock_guard<std::mutex> lock(marker_mu_);
    return marker_fd_;
  }

  // The marker crosses exec: "<marker fd>" (exec_handover.h).
  bool DescribeForExec(std::vector<std::string>* fields,
                       std::vector<int>* keep) override {
    int marker = marker_fd();
    if (marker < 0) return false;
    *fields = {std::to_string(marker)};
    *keep = {marker};
    return true;
  }

  // The marker's name is freed for a receiver that is preloaded (its
  // adoption binds it again); a plain one leaves clients on TCP.
  void PassedOut() override {
    std::lock_guard<std::mutex> lock(marker_mu_);
    if (marker_fd_ < 0) return;
    sys::close(marker_fd_);
    marker_fd_ = -1;
  }

  void RefuseOffer(int accepted_fd, ConnectionEndpoints* ends) override {
    std::string key;
    if (OfferKey(accepted_fd, ends, &key) && Doorbell::ClientWaitSocketBound(key))
      Doorbell::DeclineOffer(key);
  }

  std::unique_ptr<Transport> Claim(int accepted_fd, ConnectionEndpoints* ends,
                                   Decline* decline) override {
    std::string key;
    if (!OfferKey(accepted_fd, ends, &key)) {
      *decline = {FallbackReason::kPeerNotVsocket, false};
      return nullptr;
    }
    if (!Doorbell::ClientWaitSocketBound(key)) {
      // No offer: a plain TCP client, or one that chose TCP (short_lived).
      // Clients probe the marker before they offer, so it is drained at
      // claims; one that probed and then chose TCP leaves a connection in
      // its backlog (SOMAXCONN), emptied here now and then.
      if (unoffered_.fetch_add(1, std::memory_order_relaxed) % kDrainEveryUnoffered == 0)
        DrainMarker();
      *decline = {FallbackReason::kPeerNotVsocket, false};
      return nullptr;
    }
    DrainMarker();
    uid_t euid = ::geteuid();
    return ClaimOffer(accepted_fd, key, euid, euid == marker_uid_, decline);
  }

 private:
  static constexpr uint32_t kDrainEveryUnoffered = 64;
  // The name of the offer a client of `accepted_fd` would have made.
  static bool OfferKey(int accepted_fd, ConnectionEndpoints* ends, std::string* key) {
    Endpoint local, peer;
    if (!ends->NameLocal(accepted_fd) || !ends->NamePeer(accepted_fd) ||
        !EndpointFromSockaddr(ends->local_sa(), ends->local_len, &local) ||
        !EndpointFromSockaddr(ends->peer_sa(), ends->peer_len, &peer)) {
      return false;
    }
    *key = ConnectionKey(local, peer.port);
    return true;
  }
  // `key`: the connection's; `euid`: ours; `same_uid`: we run as the user
  // the marker announced.
  static std::unique_ptr<Transport> ClaimOffer(int accepted_fd, const std::string& key,
                                               uid_t euid, bool same_uid,
                                               Decline* decline);
  void DrainMarker() {
    // Under the lock: PassedOut must not close the number while a drain
    // accepts on it (it could name another socket by then).
    std::lock_guard<std::mutex> lock(marker_mu_);
    if (marker_fd_ >= 0) DrainListenerMarker(marker_fd_);
  }

  mutable std::mutex marker_mu_;
  int marker_fd_;           // guarded by marker_mu_; -1: none (claims only)
  const uid_t marker_uid_;  // who bound the marker (clients see this uid)
  std::atomic<uint32_t> unoffered_{0};  // connections that came without an offer
};

std::unique_ptr<Transport> ShmListener::ClaimOffer(int accepted_fd, const std::string& key,
                                                   uid_t euid, bool same_uid,
                                                   Decline* decline) {
  // The accepting process decides, not the user that listened: a client
  // that finds a listener of another user hands its offer over sealed
  // (offer_hand_out.h), so a worker running as the client's user (Apache's
  // and nginx's www-data under a root master) takes it.  A named offer lies
  // in the marker user's directory: only a process of that user opens it.
  // The budget and the private descriptors read the limit once.
  sys::NofileLimitSnapshot nofile_limit;
  FallbackReason over_budget = FallbackReason::kNone;
  DescriptorReservation descriptors = DescriptorReservation::Take(
      same_uid ? kNamedSegmentFds : kSealedSegmentFds, &over_budget);
  if (!descriptors) {
    // No room for one more connection here: TCP, at once.
    Doorbell::DeclineOffer(key);
    *decline = {over_budget, true};
    return nullptr;
  }
  std::unique_ptr<ShmSegment> segment;
  // A named offer lives in the marker user's directory; a client that
  // shares with other users hands a sealed one over instead.
  int err = same_uid ? ShmSegment::OpenOffer(key, euid, &segment) : -ENOENT;
  if (err == -ENOENT) {
    uid_t client_uid = 0;
    int fd = ReceiveHandedOffer(key, kHandOutWaitMs, &client_uid);
    if (fd >= 0 && !descriptors.GrowTo(kSealedSegmentFds, &over_budget)) {
      sys::close(fd);
      Doorbell::DeclineOffer(key);
      *decline = {over_budget, true};
      return nullptr;
    }
    if (fd >= 0) {
      err = ShmSegment::AdoptHandedOffer(fd, &segment);
    } else if (fd == -EACCES) {
      VSOCKET_LOG(kInfo, "declining the offer %s: uid %u and this process (uid "
                  "%u) do not share memory (VSOCKET_SHARE_UIDS)", key.c_str(),
                  static_cast<unsigned>(client_uid), static_cast<unsigned>(euid));
      Doorbell::DeclineOffer(key, Doorbell::DeclineWhy::kUsersDoNotShare);
      *decline = {FallbackReason::kUidMismatch, true};
      return nullptr;
    } else if (fd != -ENOENT) {
      err = fd;
    }
  }
  if (err != 0) {
    if (err == -ENOENT && !same_uid) {
      // A named offer in the marker user's directory: its client runs as
      // that user, not ours.
      Doorbell::DeclineOffer(key, Doorbell::DeclineWhy::kUsersDoNotShare);
      *decline = {FallbackReason::kUidMismatch, true};
    } else if (err == -ENOENT) {
      *decline = {FallbackReason::kPeerNotVsocket, false};  // no offer here
    } else if (err == -ENOMEM || err == -EMFILE || err == -ENFILE) {
      // A good offer we have no room to map (RLIMIT_AS, descriptors).
      VSOCKET_LOG(kInfo, "declining the offer %s: %s", key.c_str(),
                  strerror(-err));
      Doorbell::DeclineOffer(key);
      *decline = {ReasonForSetupError(err), true};
    } else {
      // Another user's segment (nginx workers under their own uid), or a
      // bad one: the client must not wait for its claim timeout.
      VSOCKET_LOG(kInfo, "declining the offer %s: %s", key.c_str(),
                  strerror(-err));
      Doorbell::DeclineOffer(key);
      *decline = {ShmReason().invalid_offer, true};
    }
    return nullptr;
  }
  SegmentHeader* header = segment->header();
  if (!segment->ClientInThisPidNamespace()) {
    // A client whose pids we cannot read (one in a namespace below ours:
    // the client's own check saw our pid).  Tell it at once.
    VSOCKET_LOG(kInfo, "declining the offer %s: the client is in another pid "
                "namespace", key.c_str());
    uint32_t offered = kOffered;
    header->claim.compare_exchange_strong(offered, kRevoked);
    Doorbell::DeclineOffer(key);
    *decline = {ShmReason().pid_namespace, true};
    return nullptr;
  }
  auto doorbell = std::make_unique<Doorbell>();
  err = doorbell->Open(key, 's', 'c');
  if (err != 0) {
    // Tell the client at once rather than letting its offer time out.
    uint32_t offered = kOffered;
    header->claim.compare_exchange_strong(offered, kRevoked);
    Doorbell::DeclineOffer(key);
    *decline = {ReasonForSetupError(err), true};
    return nullptr;
  }
  header->server_pid = static_cast<uint32_t>(sys::ThisProcessId());
  uint32_t expected = kOffered;
  if (!header->claim.compare_exchange_strong(expected, kClaimed,
                                             std::memory_order_seq_cst)) {
    *decline = {ShmReason().offer_revoked, true};
    return nullptr;
  }
  // The name stays until both sides release (ShmSegment::ReleaseName).
  // The liveness socket becomes private: move it out of the program's range.
  int tcp_fd = sys::DupPrivate(accepted_fd);
  bool moved = tcp_fd >= 0;
  if (!moved) tcp_fd = accepted_fd;
  auto transport = ShmTransport::Create(ShmTransport::Role::kServer,
                                        std::move(segment), std::move(doorbell),
                                        tcp_fd, 0);
  if (!transport) {
    bool no_descriptors = errno == EMFILE || errno == ENFILE;
    if (moved) sys::close(tcp_fd);
    *decline = {no_descriptors ? FallbackReason::kFdLimit
                               : ShmReason().shm_setup_failed, true};
    return nullptr;
  }
  transport->HoldDescriptors(std::move(descriptors));
  // accept() returns the number the kernel chose (the lowest free one, as
  // inetd-style servers rely on): the wait socket takes it over.
  if (moved && InstallAtUserNumber(transport->user_fd(), accepted_fd) == 0) {
    transport->set_user_fd(accepted_fd);
  } else if (moved) {
    sys::close(accepted_fd);
  }
  transport->AfterClaim();
  *decline = {FallbackReason::kNone, true};
  return transport;
}

class ShmTransportProvider final : public TransportProvider {
 public:
  const char* name() const override { return "shm"; }
  TransportKind kind() const override { return kShmKind; }
  uint32_t capabilities() const override {
    return kCapInPlaceRecv | kCapUserSpaceReadiness | kCapExecHandover;
  }

  Decline Offer(int fd, const struct sockaddr* addr, socklen_t len,
                const OfferOptions& options,
                std::unique_ptr<PendingConnection>* pending) override {
    Endpoint dst;
    if (!EndpointFromSockaddr(addr, len, &dst))
      return {FallbackReason::kPeerNotVsocket, true};
    if (dst.ip == "*") dst.ip = addr->sa_family == AF_INET6 ? "::1" : "127.0.0.1";
    if (!IsLocalAddress(dst, addr->sa_family))
      return {FallbackReason::kPeerNotLocal, false};
    ProbeResult probe = ProbeListener(dst);
    if (!probe.found) return {FallbackReason::kPeerNotVsocket, true};
    // The listener has no pid in our PID namespace: it runs in another one
    // (a container on the host network).  Pids and the names built from
    // them would mean other processes on each side.
    if (probe.pid == 0) return {ShmReason().pid_namespace, true};
    // The listener's user need not be ours: whichever process accepts
    // decides (ShmListener::ClaimOffer), and the hand-out gives the segment
    // only to a process of our user or one VSOCKET_SHARE_UIDS lists.  So an
    // offer is sealed and handed over whenever the acceptor may be another
    // user's process: the listener is another user's (a root master whose
    // workers may run as ours), or sharing with other users is on (nginx's
    // workers are not the user that listened).
    const SharingPolicy& sharing = GetSharingPolicy();
    // Read once per offer (the port search and the segment need it too).
    struct OfferNames {
      Endpoint server;
      uid_t euid;
    } const offer_names{dst, ::geteuid()};
    const bool sealed = sharing.enabled() || probe.uid != offer_names.euid;

    // The budget, the segment and the doorbell read the limit once.
    sys::NofileLimitSnapshot nofile_limit;
    FallbackReason over_budget = FallbackReason::kNone;
    DescriptorReservation descriptors = DescriptorReservation::Take(
        sealed ? kSealedSegmentFds : kNamedSegmentFds, &over_budget);
    if (!descriptors) return {over_budget, true};
    // Sealed offers have no name in the directory.
    PortNames names{[](uint16_t candidate, const void* context) {
                      const auto* offer = static_cast<const OfferNames*>(context);
                      return ShmSegment::NameExists(ConnectionKey(offer->server, candidate),
                                                    offer->euid);
                    },
                    &offer_names};
    uint16_t port = EnsureLocalPort(fd, addr->sa_family, sealed ? nullptr : &names);
    if (port == 0) return {FallbackReason::kLocalPortsBusy, true};
    std::string key = ConnectionKey(dst, port);
    std::unique_ptr<ShmSegment> segment;
    int err = sealed
                  ? ShmSegment::CreateSealedOffer(options.ring_bytes, &segment)
                  : ShmSegment::CreateOffer(key, options.ring_bytes, &segment,
                                            offer_names.euid, GetShmConfig().pool);
    if (err != 0) {
      VSOCKET_LOG(kDebug, "offer %s: segment: %s", key.c_str(), strerror(-err));
      return {ReasonForSetupError(err), true};
    }
    auto doorbell = std::make_unique<Doorbell>();
    err = doorbell->Open(key, 'c', 's');
    if (err != 0) {
      VSOCKET_LOG(kDebug, "offer %s: doorbell: %s", key.c_str(), strerror(-err));
      segment->Unlink();
      return {ReasonForSetupError(err), true};
    }
    std::unique_ptr<OfferHandOut> hand_out;
    if (sealed) {
      hand_out = OfferHandOut::Start(key, segment->fd(), &err);
      if (!hand_out) {
        VSOCKET_LOG(kDebug, "offer %s: hand-out: %s", key.c_str(), strerror(-err));
        return {ReasonForSetupError(err), true};
      }
    }
    *pending = std::make_unique<ShmPendingConnection>(
        std::move(segment), std::move(doorbell), std::move(descriptors),
        std::move(hand_out), probe.pid);
    return {FallbackReason::kNone, true};
  }

  std::unique_ptr<ListenerAttachment> AttachListener(
      int listen_fd, bool kernel_listening) override {
    // The marker goes up before the kernel listens whenever the port is
    // already known, so that no client can connect between the two and
    // find the port open but no marker (it would stay on TCP for good:
    // torch's store client, retrying while rank 0 starts, hit that window).
    // A client that finds the marker a moment too early gets ECONNREFUSED,
    // and its withdrawn offer is unlinked with it.  An unbound socket gets
    // its port from listen(), so its marker follows the kernel's listen.
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    Endpoint bound;
    if (sys::getsockname(listen_fd, reinterpret_cast<struct sockaddr*>(&ss), &len) != 0 ||
        !EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(&ss), len, &bound)) {
      return nullptr;
    }
    if (!kernel_listening && bound.port == 0) return nullptr;
    int fd = OpenListenerMarker(bound);
    if (fd == -EADDRINUSE && kernel_listening) {
      // Another process's listener already announces this address: ours
      // shares its kernel socket (received with SCM_RIGHTS) or its port
      // (SO_REUSEPORT).  Clients offer to that marker, so claim what
      // arrives here, as its user.
      ProbeResult holder = ProbeListener(bound);
      if (holder.found) return std::make_unique<ShmListener>(-1, holder.uid);
    }
    if (fd < 0) {
      VSOCKET_LOG(kDebug, "no listener marker for port %u: %s", bound.port,
                  strerror(-fd));
      return nullptr;
    }
    return std::make_unique<ShmListener>(fd, ::geteuid());
  }

  bool ExecDescriptors(const std::vector<std::string>& fields,
                       std::vector<int>* fds) override {
    ShmTransport::Role role;
    ShmTransport::InheritedFds inherited;
    if (!ShmTransport::ParseExecFields(fields, &role, &inherited)) return false;
    *fds = {inherited.segment, inherited.tcp};
    if (inherited.side >= 0) fds->push_back(inherited.side);
    return true;
  }

  std::unique_ptr<Transport> AdoptFromExec(const std::vector<std::string>& fields,
                                           int user_fd, const char** why) override {
    ShmTransport::Role role;
    ShmTransport::InheritedFds inherited;
    if (!ShmTransport::ParseExecFields(fields, &role, &inherited)) {
      *why = "malformed connection entry";
      return nullptr;
    }
    auto transport = ShmTransport::AdoptInherited(role, user_fd, inherited, why);
    // A sealed segment came with its side state's memfd.
    if (transport)
      transport->HoldDescriptors(DescriptorReservation::Force(
          inherited.side >= 0 ? kSealedSegmentFds : kNamedSegmentFds));
    return transport;
  }

  bool ListenerExecDescriptors(const std::vector<std::string>& fields,
                               std::vector<int>* fds) override {
    int marker;
    if (fields.size() != 1 || !ParseDescriptorNumber(fields[0], &marker)) return false;
    *fds = {marker};
    return true;
  }

  std::unique_ptr<ListenerAttachment> AdoptListenerFromExec(
      const std::vector<std::string>& fields, const char** why) override {
    std::vector<int> fds;
    if (!ListenerExecDescriptors(fields, &fds)) {
      *why = "malformed listener entry";
      return nullptr;
    }
    if (!IsListenerMarker(fds[0])) {
      *why = "not a listener marker";
      return nullptr;
    }
    int marker = sys::MovePrivate(fds[0]);
    sys::fcntl(marker, F_SETFD, FD_CLOEXEC);
    return std::make_unique<ShmListener>(marker, ::geteuid());
  }

  bool IsUserDescriptor(int fd) const override {
    return Doorbell::IsVsocketDatagramSocket(fd);
  }
};

}  // namespace

TransportProvider* ShmProvider() {
  static ShmTransportProvider* provider = [] {
    // Read the sharing policy now, at registration (library load), while
    // the environment is the one the user gave: nginx empties its workers'
    // environment before they accept.
    GetSharingPolicy();
    GetShmConfig();
    ShmReason();  // registered before the live page names the reasons
    return new ShmTransportProvider();
  }();
  return provider;
}

}  // namespace vsocket::fifo
