#include "rdma_backend/rdma_stats.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "rdma_backend/rdma_config.h"
#include "vsocket/stats.h"

namespace vsocket::rdma {
namespace {

std::atomic<uint64_t> g_registered{0};
std::atomic<uint64_t> g_registered_peak{0};
std::atomic<uint64_t> g_per_connection_max{0};
std::atomic<uint64_t> g_user_regions{0};
std::atomic<int64_t> g_links{0};
std::atomic<int64_t> g_link_qps{0};
std::atomic<bool> g_links_used{false};

void AppendSection(std::string* out) {
  uint64_t peak = g_registered_peak.load(std::memory_order_relaxed);
  bool links_used = g_links_used.load(std::memory_order_relaxed);
  if (peak == 0 && !links_used) return;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                ",\"rdma_registered\":{\"bytes\":%llu,\"peak_bytes\":%llu,"
                "\"max_per_connection_bytes\":%llu,\"limit_bytes\":%llu",
                static_cast<unsigned long long>(g_registered.load(std::memory_order_relaxed)),
                static_cast<unsigned long long>(peak),
                static_cast<unsigned long long>(
                    g_per_connection_max.load(std::memory_order_relaxed)),
                static_cast<unsigned long long>(GetRdmaConfig().max_registered_mb << 20));
  *out += buf;
  uint64_t user = g_user_regions.load(std::memory_order_relaxed);
  if (user > 0) {
    std::snprintf(buf, sizeof(buf), ",\"user_region_bytes\":%llu",
                  static_cast<unsigned long long>(user));
    *out += buf;
  }
  if (links_used) {
    std::snprintf(buf, sizeof(buf), ",\"links\":%lld,\"link_qps\":%lld",
                  static_cast<long long>(g_links.load(std::memory_order_relaxed)),
                  static_cast<long long>(g_link_qps.load(std::memory_order_relaxed)));
    *out += buf;
  }
  *out += "}";
}

void MaxInto(std::atomic<uint64_t>* slot, uint64_t value) {
  uint64_t seen = slot->load(std::memory_order_relaxed);
  while (value > seen &&
         !slot->compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// The section appears once RDMA was used: registered on first use only.
void RegisterSectionOnce() {
  static std::once_flag once;
  std::call_once(once, [] { RegisterStatsSection(&AppendSection); });
}

}  // namespace

void StatsRdmaRegistered(int64_t delta, uint64_t connection_bytes) {
  RegisterSectionOnce();
  uint64_t now = g_registered.fetch_add(static_cast<uint64_t>(delta),
                                        std::memory_order_relaxed) +
                 static_cast<uint64_t>(delta);
  MaxInto(&g_registered_peak, now);
  MaxInto(&g_per_connection_max, connection_bytes);
}

uint64_t StatsRdmaRegisteredBytes() {
  return g_registered.load(std::memory_order_relaxed);
}

void StatsRdmaLinks(int links_delta, int qps_delta) {
  RegisterSectionOnce();
  g_links_used.store(true, std::memory_order_relaxed);
  g_links.fetch_add(links_delta, std::memory_order_relaxed);
  g_link_qps.fetch_add(qps_delta, std::memory_order_relaxed);
}

void StatsRdmaUserRegion(int64_t delta) {
  RegisterSectionOnce();
  g_user_regions.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
}

}  // namespace vsocket::rdma
