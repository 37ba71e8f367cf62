#include "rdma_backend/rdma_negotiation.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "rdma_backend/link_registry.h"
#include "rdma_backend/memory_pool.h"
#include "rdma_backend/rdma_cm_connection.h"
#include "rdma_backend/rdma_config.h"
#include "rdma_backend/rdma_reasons.h"
#include "vsocket/config.h"
#include "vsocket/log.h"
#include "rdma_backend/rdma_stats.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {
namespace {

struct NegativeAnswer {
  FallbackReason reason;
  int64_t expires_ns;
};

std::mutex g_cache_mu;
std::map<std::string, NegativeAnswer>* g_cache = nullptr;  // guarded by g_cache_mu
// Destinations that rejected a link hello (a version-1 server): they get
// the per-connection hello until the entry expires (the negative TTL).
std::map<std::string, int64_t>* g_no_links = nullptr;      // guarded by g_cache_mu

std::string DestinationKey(const struct sockaddr_in& dst) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &dst.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(dst.sin_port));
}

bool LookupNegative(const std::string& key, FallbackReason* reason) {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (g_cache == nullptr) return false;
  auto it = g_cache->find(key);
  if (it == g_cache->end()) return false;
  if (it->second.expires_ns <= MonotonicNs()) {
    g_cache->erase(it);
    return false;
  }
  *reason = it->second.reason;
  return true;
}

void RememberNegative(const std::string& key, FallbackReason reason) {
  uint32_t ttl_ms = GetRdmaConfig().negative_ttl_ms;
  if (ttl_ms == 0) return;
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (g_cache == nullptr) g_cache = new std::map<std::string, NegativeAnswer>();
  if (g_cache->size() > 4096) g_cache->clear();  // bounded memory
  (*g_cache)[key] = {reason, MonotonicNs() + int64_t{ttl_ms} * 1'000'000};
}

bool LookupNoLinks(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (g_no_links == nullptr) return false;
  auto it = g_no_links->find(key);
  if (it == g_no_links->end()) return false;
  if (it->second <= MonotonicNs()) {
    g_no_links->erase(it);
    return false;
  }
  return true;
}

void RememberNoLinks(const std::string& key) {
  uint32_t ttl_ms = GetRdmaConfig().negative_ttl_ms;
  if (ttl_ms == 0) return;
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (g_no_links == nullptr) g_no_links = new std::map<std::string, int64_t>();
  if (g_no_links->size() > 4096) g_no_links->clear();  // bounded memory
  (*g_no_links)[key] = MonotonicNs() + int64_t{ttl_ms} * 1'000'000;
}

// What a failed RdmaConnect errno means for path selection.
FallbackReason ReasonForConnectError(int err) {
  switch (err) {
    case ECONNREFUSED:  // REJECTED: no vsocket RDMA listener on that port
      return FallbackReason::kPeerNotVsocket;
    case ETIMEDOUT:
    case EAGAIN:
      return RdmaReason().rdma_probe_failed;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
    case ENODEV:
    case EPROTONOSUPPORT:  // iWARP: no WRITE WITH IMMEDIATE
      return RdmaReason().no_rdma_device;
    case ENOMEM:
      return RdmaReason().rdma_memory_limit;
    case ENOBUFS:  // the server declined: its memory limit
      return RdmaReason().peer_rdma_memory_limit;
    case EREMOTEIO:  // the server declined for a cause we do not know
      return RdmaReason().peer_declined_rdma;
    default:
      return RdmaReason().rdma_setup_failed;
  }
}

// Our memory limit sends this connection to TCP: tell the server (which
// would otherwise think us a plain TCP client), bounded by the probe time.
void DeclineToPeer(const struct sockaddr_in& dst, uint16_t local_tcp_port) {
  if (local_tcp_port == 0) return;  // a bare channel: no accept() to inform
  RdmaSendDecline(dst, local_tcp_port, DeclineCause::kMemoryLimit,
                  int64_t{GetRdmaConfig().probe_ms} * 1'000'000);
}

// What a DECLINE's cause (link_wire.h) means for path selection.
FallbackReason ReasonForLinkDecline(uint8_t cause) {
  if (cause == static_cast<uint8_t>(link::LinkDeclineCause::kMemory) ||
      cause == static_cast<uint8_t>(link::LinkDeclineCause::kSlotsFull)) {
    return RdmaReason().peer_rdma_memory_limit;
  }
  return RdmaReason().peer_declined_rdma;
}

// Opens the connection over the link to `dst` (made first if there is
// none), by `deadline`.  Returns false when `dst` rejected the link hello
// (remembered: the caller then uses the per-connection hello); otherwise
// true with *reason (kNone and *channel: committed at ACCEPT).
bool ProbeOverLink(const struct sockaddr_in& dst, const std::string& key,
                   uint16_t local_tcp_port, int64_t deadline,
                   std::unique_ptr<RdmaChannel>* channel, FallbackReason* reason) {
  std::string error;
  // At most one new link when the server says its listener is gone (a new
  // process may listen there now) or the link died under us.
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<LinkWatch> watch = ClientLink(dst, deadline, &error);
    if (!watch) {
      int err = errno;
      if (err == ECONNREFUSED) {
        VSOCKET_LOG(kDebug, "rdma: %s rejected the link hello: per-connection "
                    "setup for it", key.c_str());
        RememberNoLinks(key);
        return false;
      }
      *reason = ReasonForConnectError(err);
      VSOCKET_LOG(kInfo, "rdma link to %s failed: %s", key.c_str(), error.c_str());
      if (*reason != RdmaReason().rdma_memory_limit) {
        RememberNegative(key, *reason);
      } else {
        DeclineToPeer(dst, local_tcp_port);
      }
      return true;
    }
    const std::shared_ptr<RdmaLink>& link = watch->link();
    LinkConnection conn;
    uint8_t cause = 0;
    // The open is a step of its own, bounded as each CM step of the
    // per-connection setup is: a link set up just now (0.5-1 s in the TCG
    // guest) does not leave it a deadline already past.
    const int64_t open_deadline =
        std::max(deadline, MonotonicNs() + int64_t{GetRdmaConfig().probe_ms} * 1'000'000);
    int rc = link->Open(local_tcp_port, LinkRingBytes(), open_deadline, &conn, &cause);
    int err = errno;
    link->SignalTouched(link::kNoSlot);  // what it filed for others
    if (rc == 0) {
      *channel = RdmaChannel::OnLink(link, conn, link->pool(), ConnectionOptions());
      *reason = FallbackReason::kNone;
      return true;
    }
    bool gone = (err == ECONNREFUSED &&
                 cause == static_cast<uint8_t>(link::LinkDeclineCause::kListenerGone)) ||
                err == ECONNRESET;
    if (gone) {
      DropClientLink(dst, watch.get());
      if (attempt == 0 && MonotonicNs() < open_deadline) {
        deadline = open_deadline;
        continue;
      }
    }
    switch (err) {
      case ECONNREFUSED:
        *reason = gone ? RdmaReason().rdma_setup_failed : ReasonForLinkDecline(cause);
        break;
      case ENOMEM:
      case EBUSY:  // no slice, no slot: ours
        *reason = RdmaReason().rdma_memory_limit;
        DeclineToPeer(dst, local_tcp_port);
        break;
      case ETIMEDOUT:  // a CANCEL went
        *reason = RdmaReason().rdma_probe_failed;
        break;
      default:
        *reason = RdmaReason().rdma_setup_failed;
    }
    VSOCKET_LOG(kInfo, "rdma: open over the link to %s failed: %s (cause %u)",
                key.c_str(), strerror(err), cause);
    return true;
  }
}

}  // namespace

bool HaveRdmaDevice() {
  static const bool have = [] {
    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    if (list != nullptr) ibv_free_device_list(list);
    return list != nullptr && n > 0;
  }();
  return have;
}

void WarmUpRdma() {
  static std::once_flag once;
  std::call_once(once, [] {
    int n = 0;
    struct ibv_context** contexts = rdma_get_devices(&n);
    if (contexts == nullptr) return;
    for (int i = 0; i < n; ++i) {
      std::string error;
      if (MemoryPool::ForDevice(contexts[i], &error) == nullptr) {
        VSOCKET_LOG(kInfo, "rdma: no memory pool for %s: %s",
                    ibv_get_device_name(contexts[i]->device), error.c_str());
      }
    }
    rdma_free_devices(contexts);
  });
}

uint64_t ExpectedRegisteredBytes() {
  uint64_t ring = GetRdmaConfig().ring_bytes;
  return ring + ring;  // our receive ring's data area + the peer's mirror
}

bool OverMemoryLimit() {
  uint64_t limit = GetRdmaConfig().max_registered_mb << 20;
  return StatsRdmaRegisteredBytes() + ExpectedRegisteredBytes() > limit;
}

uint32_t LinkRingBytes() {
  // With the defaults (256 MiB, 1 MiB rings): 64 connections at 1 MiB, 128
  // at 64 KiB, 1,024 at 16 KiB, then 10,240 at 4 KiB (the smallest ring,
  // fifo::IsValidCapacity), each costing its ring and the peer's mirror:
  // over 11,000 connections in all.
  uint64_t ring = GetRdmaConfig().ring_bytes;
  const uint64_t sixteenth = (GetRdmaConfig().max_registered_mb << 20) / 16;
  const uint64_t used = StatsRdmaRegisteredBytes();
  if (used + 2 * ring > 8 * sixteenth) ring = std::min<uint64_t>(ring, 64 * 1024);
  if (used >= 9 * sixteenth) ring = std::min<uint64_t>(ring, 16 * 1024);
  if (used >= 11 * sixteenth) ring = std::min<uint64_t>(ring, 4 * 1024);
  return static_cast<uint32_t>(ring);
}

ChannelOptions ConnectionOptions() {
  ChannelOptions opt;
  opt.ring_capacity = GetRdmaConfig().ring_bytes;
  opt.spin_ns = GetConfig().spin_us * 1000;
  opt.cork_max = GetRdmaConfig().cork_bytes;
  return opt;
}

FallbackReason ProbeRdmaPeer(const struct sockaddr_in& dst,
                             uint16_t local_tcp_port,
                             std::unique_ptr<RdmaChannel>* channel) {
  if (!HaveRdmaDevice()) return RdmaReason().no_rdma_device;
  std::string key = DestinationKey(dst);
  FallbackReason cached;
  if (LookupNegative(key, &cached)) return cached;
  if (OverMemoryLimit()) {
    DeclineToPeer(dst, local_tcp_port);
    return RdmaReason().rdma_memory_limit;
  }

  if (GetRdmaConfig().links && !LookupNoLinks(key)) {
    int64_t deadline = MonotonicNs() + int64_t{GetRdmaConfig().probe_ms} * 1'000'000;
    FallbackReason reason;
    if (ProbeOverLink(dst, key, local_tcp_port, deadline, channel, &reason)) {
      return reason;
    }
  }

  ChannelOptions opt = ConnectionOptions();
  opt.connect_timeout_ns = int64_t{GetRdmaConfig().probe_ms} * 1'000'000;
  opt.hello_tcp_port = local_tcp_port;
  std::string error;
  int64_t start = MonotonicNs();
  std::unique_ptr<RdmaChannel> made = RdmaConnect(dst, opt, &error);
  if (!made) {
    int err = errno;
    FallbackReason reason = ReasonForConnectError(err);
    VSOCKET_LOG(kInfo, "rdma probe %s failed after %lld us: %s", key.c_str(),
                static_cast<long long>((MonotonicNs() - start) / 1000),
                error.c_str());
    // Memory limits, ours or the server's, are not remembered: memory
    // comes back as connections close.
    if (reason == RdmaReason().rdma_memory_limit) {
      DeclineToPeer(dst, local_tcp_port);
    } else if (reason != RdmaReason().peer_rdma_memory_limit &&
               reason != RdmaReason().peer_declined_rdma) {
      RememberNegative(key, reason);
    }
    return reason;
  }
  VSOCKET_LOG(kDebug, "rdma probe %s: connected in %lld us", key.c_str(),
              static_cast<long long>((MonotonicNs() - start) / 1000));
  *channel = std::move(made);
  return FallbackReason::kNone;
}

void ClearNegativeCache() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  if (g_cache != nullptr) g_cache->clear();
  if (g_no_links != nullptr) g_no_links->clear();
}

}  // namespace vsocket::rdma
