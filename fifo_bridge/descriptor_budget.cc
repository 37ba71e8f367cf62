#include "fifo_bridge/descriptor_budget.h"

#include <atomic>

#include "base/private_fd.h"
#include "vsocket/config.h"

namespace vsocket::fifo {
namespace {

std::atomic<int> g_connections{0};

}  // namespace

DescriptorReservation DescriptorReservation::Take(bool force) {
  DescriptorReservation r;
  long soft_limit = 0;
  if (!force && sys::PrivateFdsShareAppLimit(&soft_limit)) {
    long budget = soft_limit * GetConfig().fd_share_percent / 100;
    int now = g_connections.load(std::memory_order_relaxed);
    do {
      if (long{now + 1} * kPrivateFdsPerConnection > budget) return r;
    } while (!g_connections.compare_exchange_weak(now, now + 1,
                                                  std::memory_order_relaxed));
  } else {
    g_connections.fetch_add(1, std::memory_order_relaxed);
  }
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
