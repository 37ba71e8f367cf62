#include "base/after_fork.h"

#include <pthread.h>

#include <atomic>

namespace vsocket::sys {
namespace {

constexpr int kMaxHooks = 8;
std::atomic<void (*)()> g_hooks[kMaxHooks] = {};
std::atomic<int> g_hook_count{0};

// Set by the child handler below, taken by the first RunForkedChildWork.
std::atomic<bool> g_pending{false};

// Registered when the library loads.  Only a store: see after_fork.h.
const bool g_fork_hook = [] {
  pthread_atfork(nullptr, nullptr,
                 [] { g_pending.store(true, std::memory_order_release); });
  return true;
}();

}  // namespace

bool RunInEachForkedChild(void (*hook)()) {
  int slot = g_hook_count.fetch_add(1, std::memory_order_acq_rel);
  if (slot >= kMaxHooks) return false;
  g_hooks[slot].store(hook, std::memory_order_release);
  return true;
}

void RunForkedChildWork() {
  if (!g_pending.load(std::memory_order_acquire)) return;
  if (!g_pending.exchange(false, std::memory_order_acq_rel)) return;
  int count = g_hook_count.load(std::memory_order_acquire);
  for (int i = 0; i < count && i < kMaxHooks; ++i) {
    if (void (*hook)() = g_hooks[i].load(std::memory_order_acquire)) hook();
  }
}

}  // namespace vsocket::sys
