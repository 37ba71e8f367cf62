#include "vsocket/poller_slots.h"
#include "base/after_fork.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "vsocket/config.h"

namespace vsocket {
namespace {

std::atomic<int> g_spinning{0};

int Slots() {
  static const int slots = [] {
    // The parent's spinning threads do not exist in a child.
    ::vsocket::sys::AtFork(nullptr, nullptr,
                   [] { g_spinning.store(0, std::memory_order_relaxed); });
    if (GetConfig().spin_threads != 0)
      return static_cast<int>(GetConfig().spin_threads);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus >= 4 ? static_cast<int>(cpus / 2) : 1;
  }();
  return slots;
}

}  // namespace

PollerSlot::PollerSlot() {
  int now = g_spinning.load(std::memory_order_relaxed);
  do {
    if (now >= Slots()) {
      taken_ = false;
      return;
    }
  } while (!g_spinning.compare_exchange_weak(now, now + 1,
                                             std::memory_order_acq_rel));
  taken_ = true;
}

PollerSlot::~PollerSlot() {
  if (taken_) g_spinning.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace vsocket
