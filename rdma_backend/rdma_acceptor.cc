#include "rdma_backend/rdma_acceptor.h"
#include "base/after_fork.h"
#include "rdma_backend/backlog_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "rdma_backend/link_registry.h"
#include "rdma_backend/link_watch.h"
#include "rdma_backend/progress_thread.h"
#include "rdma_backend/rdma_cm_connection.h"
#include "rdma_backend/rdma_negotiation.h"
#include "rdma_backend/rdma_transport.h"
#include "rdma_backend/readiness_socket.h"
#include "rdma_backend/rdma_config.h"
#include "rdma_backend/rdma_reasons.h"
#include "vsocket/config.h"
#include "vsocket/log.h"
#include "base/real_libc.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {

namespace {

// What accept() reports for a request our side could not set up.
FallbackReason ReasonForRefusal(int err) {
  if (err == EMFILE || err == ENFILE) return FallbackReason::kFdLimit;
  return err == ENOMEM || err == EPERM ? RdmaReason().rdma_memory_limit
                                       : RdmaReason().rdma_setup_failed;
}

// What accept() reports for a client that declined RDMA (wire_format.h).
FallbackReason ReasonForDecline(uint8_t cause) {
  return cause == static_cast<uint8_t>(DeclineCause::kMemoryLimit)
             ? RdmaReason().peer_rdma_memory_limit
             : RdmaReason().peer_declined_rdma;
}

// How long the server's half of a handshake may take (CONNECT_REQUEST to
// ESTABLISHED) on the progress thread, and how long accept() waits for it.
constexpr int64_t kServerHandshakeNs = 1'000'000'000;

// "a.b.c.d:port" for an IPv4 or IPv4-mapped IPv6 address; "" otherwise.
std::string ClientKey(const struct sockaddr* addr, uint16_t port) {
  char ip[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr,
              ip, sizeof(ip));
  } else if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], ip, sizeof(ip));
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    }
  } else {
    return "";
  }
  return std::string(ip) + ":" + std::to_string(port);
}

class ListenerState : public ProgressWatcher,
                      public LinkOpenHandler,
                      public std::enable_shared_from_this<ListenerState> {
 public:
  // `exclusive`: only this process can accept the kernel listener's
  // connections (no SO_REUSEPORT sibling; see CloseExpired).
  ListenerState(std::unique_ptr<RdmaListener> listener, int timer_fd,
                uint16_t port, bool exclusive)
      : owner_pid_(::getpid()), listener_(std::move(listener)),
        timer_fd_(timer_fd), port_(port), exclusive_(exclusive) {}

  // Any thread: the kernel listener was sent to another process
  // (SCM_RIGHTS), which may accept connections whose channels are parked
  // here.
  void PassedOut() { exclusive_.store(false); }

  // Version-2 hellos on this port make links (LinkListener), watched by the
  // progress thread, whose OPENs come to OnOpens.
  void AcceptLinks() {
    LinkOptions opt;
    opt.connect_timeout_ns = kServerHandshakeNs;
    links_ = LinkListener::ForRequests(opt);
    std::weak_ptr<ListenerState> self = weak_from_this();
    listener_->SetLinkHandler([self](rdma_cm_event* ev) {
      if (auto state = self.lock()) {
        state->OnLinkRequest(ev);
      } else {  // cannot happen: the state owns the listener
        rdma_cm_id* id = ev->id;
        rdma_reject(id, nullptr, 0);
        rdma_ack_cm_event(ev);
        rdma_destroy_id(id);
      }
    });
  }

  // Progress thread, from a link's watch: answers each waiting OPEN as
  // OnReadable answers a per-connection hello: the key is pending before
  // the ACCEPT leaves (the client's SYN follows it), the transport is
  // parked for accept(), and a refusal keeps its reason for accept().
  void OnOpens(const std::shared_ptr<RdmaLink>& link) override {
    sockaddr_storage peer;
    bool have_peer = link->PeerAddress(&peer);
    OpenRequest req;
    while (link->NextOpen(&req)) {
      if (stopped_.load() || owner_pid_ != ::getpid() || !have_peer) {
        link->DeclineOpen(req, link::LinkDeclineCause::kListenerGone);
        continue;
      }
      std::string key = ClientKey(reinterpret_cast<const sockaddr*>(&peer), req.tcp_port);
      std::unique_ptr<RdmaTransport> stale;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Parked& p = parked_[key];
        stale = std::move(p.transport);  // a stale pairing: replaced (reset)
        p.pending = true;
        p.refused = FallbackReason::kNone;
        p.expires_ns = MonotonicNs() + kServerHandshakeNs;
      }
      stale.reset();
      if (OverMemoryLimit()) {
        VSOCKET_LOG(kInfo, "rdma: declining the OPEN of %s: over "
                    "VSOCKET_RDMA_MAX_REGISTERED_MB", key.c_str());
        link->DeclineOpen(req, link::LinkDeclineCause::kMemory);
        Refuse(key, ENOMEM);
        continue;
      }
      auto ready = std::make_unique<ReadinessSocket>();
      if (int err = ready->Open(); err != 0) {
        link->DeclineOpen(req, link::LinkDeclineCause::kMemory);
        Refuse(key, -err);
        continue;
      }
      LinkConnection conn;
      if (link->AcceptOpen(req, LinkRingBytes(), &conn) != 0) {
        int err = errno;  // ECANCELED: the client gave up; else declined
        Refuse(key, err == ECANCELED || err == EINVAL ? EAGAIN : err);
        continue;
      }
      std::unique_ptr<RdmaTransport> transport = RdmaTransport::Create(
          RdmaChannel::OnLink(link, conn, link->pool(), ConnectionOptions()),
          std::move(ready));
      if (!transport) {  // its channel was reset: the client sees RESET
        Refuse(key, errno);
        continue;
      }
      Park(key, std::move(transport));
    }
  }

  pid_t owner_pid() const { return owner_pid_; }
  int listener_fd() const { return listener_->fd(); }
  int timer_fd() const { return timer_fd_; }

  // Progress thread: a connection request (listener fd) or the TTL timer.
  void OnReadable(int fd) override {
    if (fd == timer_fd_) {
      uint64_t ticks;
      ssize_t ignored = sys::read(timer_fd_, &ticks, sizeof(ticks));
      (void)ignored;
      CloseExpired();
      return;
    }
    std::lock_guard<std::mutex> accept_lock(accept_mu_);
    if (!listener_) return;  // stopped
    for (int i = 0; i < 16; ++i) {
      std::string key;
      std::string error;
      RdmaListener::PeerInfo info;
      // The connection's descriptors, made before rdma_accept: the client
      // commits to RDMA at ESTABLISHED, so nothing may fail after it.
      std::unique_ptr<ReadinessSocket> ready;
      std::unique_ptr<RdmaTransport> stale;
      bool over_limit = false;
      // Runs before the request is answered, so that the client's SYN
      // (which follows our answer) finds its key pending or recorded.
      auto mark_pending = [&](const RdmaListener::PeerInfo& peer) {
        if (peer.declined != 0) {
          RecordDecline(peer);
          return false;
        }
        if (peer.tcp_port == 0) return true;  // a bare channel, not for a socket
        key = ClientKey(reinterpret_cast<const sockaddr*>(&peer.addr),
                        peer.tcp_port);
        {
          std::lock_guard<std::mutex> lock(mu_);
          Parked& p = parked_[key];
          stale = std::move(p.transport);  // a stale pairing: replaced (reset)
          p.pending = true;
          p.expires_ns = MonotonicNs() + kServerHandshakeNs;
        }
        if (OverMemoryLimit()) {  // Refuse(): accept() says rdma_memory_limit
          VSOCKET_LOG(kInfo, "rdma: rejecting the connection request of %s: "
                      "over VSOCKET_RDMA_MAX_REGISTERED_MB", key.c_str());
          over_limit = true;
          errno = ENOMEM;
          return false;
        }
        ready = std::make_unique<ReadinessSocket>();
        if (int err = ready->Open(); err != 0) {
          ready.reset();
          errno = -err;
          return false;
        }
        return true;
      };
      std::unique_ptr<RdmaChannel> channel =
          listener_->Accept(0, &error, &info, mark_pending);
      int err = errno;
      stale.reset();
      if (!channel) {
        if (info.declined != 0) continue;  // recorded by mark_pending
        if (err == EINPROGRESS) continue;  // a link hello (OnLinkRequest)
        if (!key.empty()) Refuse(key, err);
        if (err == EAGAIN) return;
        if (over_limit) continue;  // logged above
        VSOCKET_LOG(kWarn, "rdma: connection request refused: %s",
                    error.c_str());
        continue;
      }
      if (key.empty()) {
        VSOCKET_LOG(kWarn, "rdma: closing a channel whose hello names no TCP "
                    "connection (tcp_port 0)");
        channel->Abort();
        continue;
      }
      // Only the progress thread's watch can fail here (epoll_ctl).
      std::unique_ptr<RdmaTransport> transport =
          RdmaTransport::Create(std::move(channel), std::move(ready));
      if (!transport) {
        err = errno;
        VSOCKET_LOG(kWarn, "rdma: the connection of %s was reset after its "
                    "handshake: %s", key.c_str(), strerror(err));
        Refuse(key, err);
        continue;
      }
      Park(key, std::move(transport));
    }
  }

  // Progress thread: `transport` waits for accept() under `key`.
  void Park(const std::string& key, std::unique_ptr<RdmaTransport> transport) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Parked& p = parked_[key];
      p.transport = std::move(transport);
      p.pending = false;
      p.expires_ns = MonotonicNs() +
                     int64_t{GetConfig().claim_timeout_ms} * 1'000'000;
      cv_.notify_all();
    }
    ArmTimer();
  }

  // Progress thread, inside listener_->Accept: a link hello's QP.
  void OnLinkRequest(rdma_cm_event* ev) {
    std::string error;
    std::shared_ptr<RdmaLink> link = links_->AcceptRequest(ev, &error);
    if (!link) {
      if (errno != EAGAIN) {
        VSOCKET_LOG(kInfo, "rdma: link request refused: %s", error.c_str());
      }
      return;  // refused, or a link still waiting for its other QPs
    }
    std::shared_ptr<LinkWatch> watch = LinkWatch::Start(link, weak_from_this());
    if (!watch) {
      VSOCKET_LOG(kWarn, "rdma: cannot watch a new link: %s", strerror(errno));
      return;  // the link closes as it is released
    }
    AddServerLink(this, std::move(watch));
  }

  // Progress thread: our side could not set up the request of `key`
  // (e.g. ibv_reg_mr under a low RLIMIT_MEMLOCK, no descriptor left): the
  // client goes to TCP, and accept() names why instead of peer_not_vsocket.
  // EAGAIN: no request after all.
  void Refuse(const std::string& key, int err) {
    std::lock_guard<std::mutex> lock(mu_);
    if (err == EAGAIN) {
      parked_.erase(key);
    } else {
      Parked& p = parked_[key];
      p.pending = false;
      p.refused = ReasonForRefusal(err);
      p.expires_ns =
          MonotonicNs() + int64_t{GetConfig().claim_timeout_ms} * 1'000'000;
      ArmTimer();
    }
    cv_.notify_all();
  }

  // Progress thread: the client of `peer` will use TCP for a reason of its
  // own, which accept() reports (a stale pairing under its key is reset).
  void RecordDecline(const RdmaListener::PeerInfo& peer) {
    if (peer.tcp_port == 0) return;
    std::string key = ClientKey(reinterpret_cast<const sockaddr*>(&peer.addr),
                                peer.tcp_port);
    if (key.empty()) return;
    VSOCKET_LOG(kDebug, "rdma: %s declined RDMA (cause %u)", key.c_str(),
                peer.declined);
    std::unique_ptr<RdmaTransport> stale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Parked& p = parked_[key];
      stale = std::move(p.transport);
      p.pending = false;
      p.refused = ReasonForDecline(peer.declined);
      p.expires_ns =
          MonotonicNs() + int64_t{GetConfig().claim_timeout_ms} * 1'000'000;
      ArmTimer();
      cv_.notify_all();
    }
  }

  // Application thread, in accept().
  std::unique_ptr<RdmaTransport> Claim(const std::string& key,
                                       FallbackReason* reason) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = parked_.find(key);
    if (it == parked_.end()) {
      *reason = FallbackReason::kPeerNotVsocket;
      return nullptr;
    }
    int64_t wait_ns = std::max<int64_t>(
        kServerHandshakeNs, int64_t{GetRdmaConfig().probe_ms} * 1'000'000);
    int64_t deadline = MonotonicNs() + wait_ns;
    while ((it = parked_.find(key)) != parked_.end() && it->second.pending) {
      int64_t left = deadline - MonotonicNs();
      if (left <= 0) break;
      cv_.wait_for(lock, std::chrono::nanoseconds(left));
    }
    if (it == parked_.end() || !it->second.transport) {
      *reason = RdmaReason().rdma_setup_failed;
      if (it != parked_.end() && it->second.refused != FallbackReason::kNone) {
        *reason = it->second.refused;
        parked_.erase(it);
      }
      return nullptr;
    }
    std::unique_ptr<RdmaTransport> transport = std::move(it->second.transport);
    parked_.erase(it);
    return transport;
  }

  // Stops accepting; resets every parked connection.
  void Stop() {
    stopped_.store(true);
    {
      std::lock_guard<std::mutex> accept_lock(accept_mu_);
      listener_.reset();
      links_.reset();
    }
    RetireServerLinks(this);  // later OPENs are declined: listener gone
    std::map<std::string, Parked> doomed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      doomed.swap(parked_);
      cv_.notify_all();
    }
    doomed.clear();  // unpaired transports reset their channels
    sys::close(timer_fd_);
  }

 private:
  struct Parked {
    // Built at the handshake, paired in accept(); null while pending or
    // refused.  Destroyed unpaired, it resets its channel.
    std::unique_ptr<RdmaTransport> transport;
    bool pending = false;
    // Set when our side refused the request: what accept() then reports.
    FallbackReason refused = FallbackReason::kNone;
    int64_t expires_ns = 0;
    // Checks in a row (CloseExpired) that found no TCP connection for it;
    // -1: the kernel's table could not be read.
    int missing = 0;
  };

  void ArmTimer() {
    struct itimerspec its = {};
    its.it_interval.tv_nsec = 250'000'000;
    its.it_value.tv_nsec = 250'000'000;
    timerfd_settime(timer_fd_, 0, &its, nullptr);
  }

  // Progress thread, on the timer.  A parked channel, or a refusal or
  // decline whose reason is kept for accept(), nobody claimed within
  // VSOCKET_CLAIM_TIMEOUT_MS:
  //  - whose client gave up (its reset, its link or CM connection died) is
  //    dropped;
  //  - when only this process can accept on the listener (`exclusive_`),
  //    waits on, as the kernel keeps its TCP connection in the backlog, for
  //    as long as that connection exists (backlog_probe.h): a server slower
  //    than the timeout must still get it, on RDMA.  A channel whose TCP
  //    connection two checks in a row did not find (a handshake whose
  //    client never connected, or vanished) is reset;
  //  - when another process may accept its TCP connection (SO_REUSEPORT, a
  //    listener passed out), nobody here ever will: it is reset, so its
  //    client gets ECONNRESET rather than waiting for ever.  So is every
  //    one when the kernel's table cannot be read.
  // Lock order: mu_, then the connection's (BrokenBeforePairing).
  void CloseExpired() {
    std::map<std::string, Parked> expired;
    const int64_t timeout = int64_t{GetConfig().claim_timeout_ms} * 1'000'000;
    const bool exclusive = exclusive_.load();
    std::vector<std::string> unclaimed;  // alive, past the timeout
    bool empty;
    {
      std::lock_guard<std::mutex> lock(mu_);
      int64_t now = MonotonicNs();
      for (auto it = parked_.begin(); it != parked_.end();) {
        Parked& p = it->second;
        if (p.pending || p.expires_ns > now) {
          ++it;
        } else if (exclusive && (!p.transport || !p.transport->BrokenBeforePairing())) {
          // A live channel, or a refusal whose reason accept() still owes.
          p.expires_ns = now + timeout;  // checked again then
          unclaimed.push_back(it->first);
          ++it;
        } else {
          expired.insert(parked_.extract(it++));
        }
      }
      empty = parked_.empty();
    }
    if (!unclaimed.empty()) {
      std::set<std::string> in_backlog;
      bool known = TcpPeersOfPort(port_, &in_backlog);
      static std::atomic<bool> warned{false};
      if (!known && !warned.exchange(true)) {
        VSOCKET_LOG(kWarn, "rdma: cannot read the kernel's TCP table "
                    "(sock_diag: %s); unclaimed channels are reset after "
                    "VSOCKET_CLAIM_TIMEOUT_MS", strerror(errno));
      }
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& key : unclaimed) {
        auto it = parked_.find(key);
        if (it == parked_.end() || it->second.pending) continue;  // claimed, or re-used
        Parked& p = it->second;
        if (!known) {
          p.missing = -1;  // no conclusion: the old rule, reset
          expired.insert(parked_.extract(it));
          continue;
        }
        p.missing = in_backlog.count(key) != 0 ? 0 : p.missing + 1;
        if (p.missing >= 2) expired.insert(parked_.extract(it));
      }
      empty = parked_.empty();
    }
    for (auto& [key, p] : expired) {
      // A refused request (our side could not set its channel up) parks no
      // channel: it only keeps its reason for an accept() that never came.
      if (!p.transport) continue;
      if (p.missing < 0) {
        VSOCKET_LOG(kWarn, "rdma: nobody accepted the connection of %s within "
                    "VSOCKET_CLAIM_TIMEOUT_MS (its TCP connection cannot be "
                    "looked for); resetting its channel", key.c_str());
      } else if (p.missing > 0) {
        VSOCKET_LOG(kWarn, "rdma: the client of %s made an RDMA channel but "
                    "no TCP connection; resetting the channel", key.c_str());
      } else if (exclusive) {
        VSOCKET_LOG(kDebug, "rdma: the client of %s gave up before accept(); "
                    "dropping its channel", key.c_str());
      } else {
        VSOCKET_LOG(kWarn, "rdma: nobody accepted the connection of %s within "
                    "VSOCKET_CLAIM_TIMEOUT_MS (the listener is shared with "
                    "another process); resetting its channel", key.c_str());
      }
      p.transport.reset();
    }
    if (empty) {
      struct itimerspec off = {};
      timerfd_settime(timer_fd_, 0, &off, nullptr);
    }
  }

  const pid_t owner_pid_;
  std::mutex accept_mu_;  // serialises Accept() with Stop()
  std::unique_ptr<RdmaListener> listener_;  // guarded by accept_mu_
  std::unique_ptr<LinkListener> links_;     // guarded by accept_mu_
  std::atomic<bool> stopped_{false};
  const int timer_fd_;
  const uint16_t port_;  // host order
  std::atomic<bool> exclusive_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Parked> parked_;  // guarded by mu_
};

std::mutex g_mu;
int g_next_handle = 1;                                        // guarded by g_mu
std::map<int, std::shared_ptr<ListenerState>>* g_listeners;   // guarded by g_mu
pid_t g_owner_pid = 0;                                        // guarded by g_mu

// pthread_atfork parent handler: after a fork, a pre-fork server's children
// would accept TCP connections whose RDMA channels this process parked, and
// the two ends would disagree on the path.  So a process that forks stops
// offering RDMA on all its listeners (new clients are rejected and use TCP,
// peer_not_vsocket); connections already made are unaffected.
void StopAllListenersAfterFork() {
  std::map<int, std::shared_ptr<ListenerState>> stopped;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_listeners == nullptr || g_owner_pid != ::getpid()) return;
    stopped.swap(*g_listeners);
  }
  if (stopped.empty()) return;
  VSOCKET_LOG(kInfo, "rdma: the process forked; its %zu listener(s) stop "
              "accepting RDMA (pre-fork servers stay on TCP)", stopped.size());
  for (auto& [handle, state] : stopped) {
    Unwatch(state->listener_fd());
    Unwatch(state->timer_fd());
    state->Stop();
  }
}

std::shared_ptr<ListenerState> Find(int handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_listeners == nullptr) return nullptr;
  auto it = g_listeners->find(handle);
  return it == g_listeners->end() ? nullptr : it->second;
}

}  // namespace

int StartRdmaListener(int listen_fd) {
  if (!HaveRdmaDevice()) return -1;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (sys::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return -1;
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  if (ss.ss_family == AF_INET) {
    addr = *reinterpret_cast<sockaddr_in*>(&ss);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    addr.sin_port = in6->sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      std::memcpy(&addr.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
    } else if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
    } else {
      return -1;  // RDMA negotiation is IPv4 only
    }
  } else {
    return -1;
  }
  if (addr.sin_port == 0) return -1;  // not bound yet: listen() assigns it
  WarmUpRdma();  // not on the progress thread during the first handshake
  ChannelOptions opt = ConnectionOptions();
  opt.connect_timeout_ns = kServerHandshakeNs;
  std::string error;
  std::unique_ptr<RdmaListener> listener =
      RdmaListener::Listen(addr, 128, opt, &error);
  if (!listener) {
    VSOCKET_LOG(kInfo, "rdma: no RDMA listener for port %u: %s",
                ntohs(addr.sin_port), error.c_str());
    return -1;
  }
  int timer_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd < 0) return -1;
  int moved = sys::MovePrivate(timer_fd);
  if (moved >= 0) timer_fd = moved;
  // SO_REUSEPORT: a sibling process may accept connections whose channels
  // park here (ListenerState::CloseExpired).
  int reuse_port = 0;
  socklen_t reuse_len = sizeof(reuse_port);
  if (sys::getsockopt(listen_fd, SOL_SOCKET, SO_REUSEPORT, &reuse_port, &reuse_len) != 0) {
    reuse_port = 1;  // unknown: assume shared
  }
  auto state = std::make_shared<ListenerState>(std::move(listener), timer_fd,
                                               ntohs(addr.sin_port),
                                               /*exclusive=*/reuse_port == 0);
  state->AcceptLinks();
  if (Watch(state->listener_fd(), state) != 0) {
    state->Stop();
    return -1;
  }
  if (Watch(state->timer_fd(), state) != 0) {
    Unwatch(state->listener_fd());
    state->Stop();
    return -1;
  }
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] {
    ::vsocket::sys::AtFork(nullptr, &StopAllListenersAfterFork, nullptr);
  });
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_listeners == nullptr || g_owner_pid != ::getpid()) {
    g_listeners = new std::map<int, std::shared_ptr<ListenerState>>();
    g_owner_pid = ::getpid();
  }
  int handle = g_next_handle++;
  (*g_listeners)[handle] = std::move(state);
  return handle;
}

void StopRdmaListener(int handle) {
  if (handle <= 0) return;
  std::shared_ptr<ListenerState> state;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_listeners == nullptr) return;
    auto it = g_listeners->find(handle);
    if (it == g_listeners->end()) return;
    state = std::move(it->second);
    g_listeners->erase(it);
  }
  if (state->owner_pid() != ::getpid()) return;  // a forked child's copy
  Unwatch(state->listener_fd());
  Unwatch(state->timer_fd());
  state->Stop();
}

void NoteRdmaListenerPassedOut(int handle) {
  if (std::shared_ptr<ListenerState> state = Find(handle)) state->PassedOut();
}

std::unique_ptr<Transport> ClaimRdmaChannel(int handle, int accepted_fd,
                                            FallbackReason* reason) {
  *reason = FallbackReason::kPeerNotVsocket;
  std::shared_ptr<ListenerState> state = Find(handle);
  if (!state || state->owner_pid() != ::getpid()) return nullptr;
  struct sockaddr_storage peer;
  socklen_t len = sizeof(peer);
  if (sys::getpeername(accepted_fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
    return nullptr;
  uint16_t port = ntohs(peer.ss_family == AF_INET6
                            ? reinterpret_cast<sockaddr_in6*>(&peer)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&peer)->sin_port);
  std::string key = ClientKey(reinterpret_cast<sockaddr*>(&peer), port);
  if (key.empty()) return nullptr;
  std::unique_ptr<RdmaTransport> transport = state->Claim(key, reason);
  if (!transport) return nullptr;
  // A client that gave up after our handshake (its kernel connect failed
  // or was still in progress) reset the channel before its SYN.
  if (transport->BrokenBeforePairing()) {
    VSOCKET_LOG(kWarn, "rdma: the channel of %s broke before accept",
                key.c_str());
    *reason = RdmaReason().rdma_setup_failed;
    return nullptr;  // released unpaired: reset
  }
  // accepted_fd's number now names the readiness socket.
  if (transport->TakeOverNumber(accepted_fd) != 0) {
    *reason = RdmaReason().rdma_setup_failed;
    return nullptr;
  }
  *reason = FallbackReason::kNone;
  return transport;
}

}  // namespace vsocket::rdma
