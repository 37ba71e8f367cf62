#include "toe_backend/toe_provider.h"

#include <cstring>
#include <mutex>
#include <string>

#include "toe_backend/cork_list.h"
#include "toe_backend/toe_config.h"
#include "toe_backend/toe_transport.h"
#include "toe_backend/uring_ring.h"
#include "vsocket/config.h"
#include "vsocket/stats.h"

namespace vsocket::toe {
namespace {

// The engine every toe connection of the process uses (static lifetime:
// connections may outlive any other owner until exit).
UringEngine* Engine();

// ,"toe_engine":{"readahead_enters":N,"window_bytes":N,"zerocopy_sends":N,
//   "sqpoll":B,...} in VSOCKET_STATS once the engine exists: how much
// read-ahead served, and whether the rings share an SQ thread.  With
// SQPOLL on: "sqpoll_calls" (Send/Recv the SQ thread ran),
// "sqpoll_wakeups" (submissions that had to wake it: an io_uring_enter
// each), "sqpoll_waits" (completions slept for after the spin) and
// "sqpoll_plain_rings" (threads that got a ring without it); asked for
// but refused, "sqpoll_refused" names the errno.  ProbeUring() does not
// block here: the engine is made only after Availability() probed.
void AppendStatsSection(std::string* out) {
  const UringEngine::Counters& c = Engine()->counters();
  *out += ",\"toe_engine\":{\"readahead_enters\":" +
          std::to_string(c.readahead_enters.load(std::memory_order_relaxed)) +
          ",\"window_bytes\":" +
          std::to_string(c.window_bytes.load(std::memory_order_relaxed)) +
          ",\"zerocopy_sends\":" +
          std::to_string(c.zerocopy_sends.load(std::memory_order_relaxed));
  const CorkCounters& k = GetCorkCounters();
  *out += ",\"corked_sends\":" +
          std::to_string(k.corked_sends.load(std::memory_order_relaxed)) +
          ",\"cork_flushes\":" + std::to_string(k.flushes.load(std::memory_order_relaxed)) +
          ",\"cork_batch_enters\":" +
          std::to_string(c.batch_enters.load(std::memory_order_relaxed)) +
          ",\"cork_tick_flushes\":" +
          std::to_string(k.tick_flushes.load(std::memory_order_relaxed)) +
          ",\"cork_bytes_abandoned\":" +
          std::to_string(k.bytes_abandoned.load(std::memory_order_relaxed));
  const UringSupport& u = ProbeUring();
  *out += u.sqpoll ? ",\"sqpoll\":true" : ",\"sqpoll\":false";
  if (u.sqpoll) {
    const SqpollCounters& q = GetSqpollCounters();
    *out += ",\"sqpoll_calls\":" +
            std::to_string(c.sqpoll_calls.load(std::memory_order_relaxed)) +
            ",\"sqpoll_wakeups\":" +
            std::to_string(q.wakeups.load(std::memory_order_relaxed)) +
            ",\"sqpoll_waits\":" + std::to_string(q.waits.load(std::memory_order_relaxed)) +
            ",\"sqpoll_plain_rings\":" +
            std::to_string(q.plain_rings.load(std::memory_order_relaxed));
  } else if (u.sqpoll_error != 0) {
    const char* name = strerrorname_np(u.sqpoll_error);
    *out += std::string(",\"sqpoll_refused\":\"") + (name ? name : "?") + "\"";
  }
  *out += "}";
}

UringEngine* Engine() {
  static UringEngine* engine = [] {
    const ToeConfig& c = GetToeConfig();
    auto* e = new UringEngine(c.readahead_bytes, c.send_zc_min, c.readahead_inheritable);
    RegisterStatsSection(&AppendStatsSection);
    return e;
  }();
  return engine;
}

bool Forced() {
  const Config& c = GetConfig();
  return c.policy == TransportPolicy::kNamed && c.transport == "toe";
}

// toe's one fallback reason of its own (vsocket/fallback_reason.h),
// registered when the provider is made.
FallbackReason IoUringUnavailable() {
  // The meaning is the README's table (vsocket-reasons --markdown).
  static const FallbackReason reason = RegisterFallbackReason(
      "io_uring_unavailable",
      "`VSOCKET_TRANSPORT=toe`, but io_uring cannot be used in this process (the "
      "`kernel.io_uring_disabled` sysctl, a seccomp profile, `RLIMIT_MEMLOCK`); the "
      "connection runs plain system calls");
  return reason;
}

// What a connection made now would get: kNone, or why it stays on TCP.
FallbackReason Availability() {
  return ProbeUring().available ? FallbackReason::kNone : IoUringUnavailable();
}

class ToePending final : public PendingConnection {
 public:
  int handshake_wait_ms() const override { return 0; }
  std::unique_ptr<Transport> Complete(int fd, FallbackReason* reason) override {
    (void)reason;
    return std::make_unique<ToeTransport>(Engine(), fd, GetToeConfig().cork_bytes);
  }
};

class ToeListener final : public ListenerAttachment {
 public:
  std::unique_ptr<Transport> Claim(int accepted_fd, ConnectionEndpoints* ends,
                                   Decline* decline) override {
    (void)ends;
    FallbackReason why = Availability();
    if (why != FallbackReason::kNone) {
      *decline = Decline{why, true};
      return nullptr;
    }
    return std::make_unique<ToeTransport>(Engine(), accepted_fd,
                                          GetToeConfig().cork_bytes);
  }
};

class Provider final : public TransportProvider {
 public:
  Provider() { IoUringUnavailable(); }  // registered before the live page names the reasons
  const char* name() const override { return "toe"; }
  TransportKind kind() const override { return kToeKind; }
  uint32_t capabilities() const override { return 0; }

  Decline Offer(int fd, const struct sockaddr* peer, socklen_t len,
                const OfferOptions& options,
                std::unique_ptr<PendingConnection>* pending) override {
    (void)fd;
    (void)peer;
    (void)len;
    // Only where forced: its gain (corked bursts) holds accepted bytes a
    // SIGKILL would lose (README.md, "Policy"); auto passes it on.
    if (!options.forced) return Decline{FallbackReason::kPeerNotVsocket, false};
    FallbackReason why = Availability();
    if (why != FallbackReason::kNone) return Decline{why, true};
    *pending = std::make_unique<ToePending>();
    return Decline{};
  }

  // Corked sends (send_cork.h) of every toe connection go out before the
  // process waits.
  void FlushHeldBack() override { FlushAllCorked(); }

  std::unique_ptr<ListenerAttachment> AttachListener(int listen_fd,
                                                     bool kernel_listening) override {
    (void)listen_fd;
    if (!kernel_listening || !Forced()) return nullptr;
    return std::make_unique<ToeListener>();
  }
};

}  // namespace

TransportProvider* ToeProvider() {
  static Provider provider;
  return &provider;
}

}  // namespace vsocket::toe
