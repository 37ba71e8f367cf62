#include "fifo_bridge/shm_memory_stats.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "vsocket/stats.h"

namespace vsocket::fifo {
namespace {

std::atomic<int64_t> g_bytes{0};
std::atomic<int64_t> g_peak{0};
std::atomic<uint64_t> g_trims{0};
std::atomic<uint64_t> g_trimmed_bytes{0};

void AppendSection(std::string* out) {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                ",\"shm_memory\":{\"bytes\":%lld,\"peak_bytes\":%lld,"
                "\"trims\":%llu,\"trimmed_bytes\":%llu}",
                static_cast<long long>(g_bytes.load(std::memory_order_relaxed)),
                static_cast<long long>(g_peak.load(std::memory_order_relaxed)),
                static_cast<unsigned long long>(g_trims.load(std::memory_order_relaxed)),
                static_cast<unsigned long long>(
                    g_trimmed_bytes.load(std::memory_order_relaxed)));
  *out += buf;
}

}  // namespace

void StatsShmMemory(int64_t delta_bytes) {
  static std::once_flag once;
  std::call_once(once, [] { RegisterStatsSection(&AppendSection); });
  int64_t now = g_bytes.fetch_add(delta_bytes, std::memory_order_relaxed) + delta_bytes;
  int64_t seen = g_peak.load(std::memory_order_relaxed);
  while (now > seen &&
         !g_peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void StatsShmTrim(uint64_t freed_bytes) {
  g_trims.fetch_add(1, std::memory_order_relaxed);
  g_trimmed_bytes.fetch_add(freed_bytes, std::memory_order_relaxed);
}

}  // namespace vsocket::fifo
