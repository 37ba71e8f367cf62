#include "fifo_bridge/descriptor_budget.h"

#include <algorithm>
#include <atomic>

#include "base/private_fd.h"
#include "fifo_bridge/sharing_policy.h"
#include "vsocket/config.h"

namespace vsocket::fifo {
namespace {

std::atomic<int> g_connections{0};

}  // namespace

int PrivateFdsPerConnection() {
  // The liveness TCP socket (a named segment is held by its name); a
  // sealed segment keeps its memfd, and its SideState is a memfd of its
  // own (side_state.h).
  return GetSharingPolicy().enabled() ? 3 : 1;
}

DescriptorReservation DescriptorReservation::Take(FallbackReason* why) {
  DescriptorReservation r;
  // The tighter of the two caps (-1: none) and the reason it gives.
  long cap = -1;
  FallbackReason cap_reason = FallbackReason::kConnectionLimit;
  if (uint32_t most = GetConfig().max_shm_connections) cap = most;
  sys::PrivateFdRange range = sys::CurrentPrivateFdRange();
  long private_fds =
      range.shares_app_table
          ? range.soft_limit * GetConfig().fd_share_percent / 100
          : range.room_above - kPrivateFdsForProcess;
  long by_descriptors = std::max(0L, private_fds) / PrivateFdsPerConnection();
  if (cap < 0 || by_descriptors < cap) {
    cap = by_descriptors;
    cap_reason = FallbackReason::kFdLimit;
  }
  int now = g_connections.load(std::memory_order_relaxed);
  do {
    if (cap >= 0 && now + 1 > cap) {
      *why = cap_reason;
      return r;
    }
  } while (!g_connections.compare_exchange_weak(now, now + 1,
                                                std::memory_order_relaxed));
  r.held_ = true;
  return r;
}

DescriptorReservation DescriptorReservation::Force() {
  DescriptorReservation r;
  g_connections.fetch_add(1, std::memory_order_relaxed);
  r.held_ = true;
  return r;
}

void DescriptorReservation::Give() {
  if (!held_) return;
  held_ = false;
  g_connections.fetch_sub(1, std::memory_order_relaxed);
}

int ReservedConnections() { return g_connections.load(std::memory_order_relaxed); }

}  // namespace vsocket::fifo
