#include "rdma_backend/rdma_negotiation.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <map>
#include <mutex>
#include <string>

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
}

}  // namespace vsocket::rdma
