#include "fifo_bridge/descriptor_budget.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "base/private_fd.h"
#include "fifo_bridge/shm_config.h"
#include "fifo_bridge/shm_reasons.h"

namespace vsocket::fifo {
namespace {

// Connections in the high half, their descriptors in the low half: one
// compare-and-swap checks and takes both.
std::atomic<uint64_t> g_counts{0};

constexpr uint64_t Pack(uint64_t connections, uint64_t fds) {
  return connections << 32 | fds;
}
constexpr long Connections(uint64_t counts) { return static_cast<long>(counts >> 32); }
constexpr long Fds(uint64_t counts) { return static_cast<long>(counts & 0xffffffffu); }

// Adds `connections` and `fds` if the result fits the caps (or `force`).
bool Add(long connections, long fds, bool force, FallbackReason* why) {
  long max_connections = -1;  // -1: no cap
  if (uint32_t most = GetShmConfig().max_shm_connections) max_connections = most;
  sys::PrivateFdRange range = sys::CurrentPrivateFdRange();
  long max_fds = std::max(
      0L, range.shares_app_table ? range.soft_limit * GetShmConfig().fd_share_percent / 100
                                 : range.room_above - kPrivateFdsForProcess);
  uint64_t now = g_counts.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    long c = Connections(now) + connections, f = Fds(now) + fds;
    if (!force && max_connections >= 0 && c > max_connections) {
      *why = ShmReason().connection_limit;
      return false;
    }
    if (!force && f > max_fds) {
      *why = FallbackReason::kFdLimit;
      return false;
    }
    next = Pack(c, f);
  } while (!g_counts.compare_exchange_weak(now, next, std::memory_order_relaxed));
  return true;
}

}  // namespace

DescriptorReservation DescriptorReservation::Take(int fds, FallbackReason* why) {
  DescriptorReservation r;
  if (Add(1, fds, false, why)) r.fds_ = fds;
  return r;
}

DescriptorReservation DescriptorReservation::Force(int fds) {
  DescriptorReservation r;
  FallbackReason unused;
  Add(1, fds, true, &unused);
  r.fds_ = fds;
  return r;
}

bool DescriptorReservation::GrowTo(int fds, FallbackReason* why) {
  if (fds <= fds_) return true;
  if (!Add(0, fds - fds_, false, why)) return false;
  fds_ = fds;
  return true;
}

void DescriptorReservation::Give() {
  if (fds_ == 0) return;
  g_counts.fetch_sub(Pack(1, fds_), std::memory_order_relaxed);
  fds_ = 0;
}

int ReservedConnections() {
  return static_cast<int>(Connections(g_counts.load(std::memory_order_relaxed)));
}

int ReservedDescriptors() {
  return static_cast<int>(Fds(g_counts.load(std::memory_order_relaxed)));
}

}  // namespace vsocket::fifo
