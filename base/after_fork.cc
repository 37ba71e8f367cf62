#include "base/after_fork.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>

namespace vsocket::sys {
namespace {

constexpr int kMaxHooks = 8;
std::atomic<void (*)()> g_hooks[kMaxHooks] = {};
std::atomic<int> g_hook_count{0};

// Set by the child handler below, taken by the first RunForkedChildWork.
std::atomic<bool> g_pending{false};

struct Handlers {
  std::atomic<void (*)()> prepare{nullptr}, parent{nullptr}, child{nullptr};
};
constexpr int kMaxHandlers = 32;
Handlers g_handlers[kMaxHandlers];
std::atomic<int> g_handler_count{0};

// Registered when the library loads.  Only a store: see after_fork.h.
const bool g_fork_hook = [] {
  AtFork(nullptr, nullptr, [] { g_pending.store(true, std::memory_order_release); });
  return true;
}();

int Recorded() { return std::min(g_handler_count.load(std::memory_order_acquire), kMaxHandlers); }

}  // namespace

int AtFork(void (*prepare)(), void (*parent)(), void (*child)()) {
  int slot = g_handler_count.fetch_add(1, std::memory_order_acq_rel);
  if (slot < kMaxHandlers) {
    g_handlers[slot].prepare.store(prepare, std::memory_order_relaxed);
    g_handlers[slot].parent.store(parent, std::memory_order_relaxed);
    g_handlers[slot].child.store(child, std::memory_order_release);
  }
  return pthread_atfork(prepare, parent, child);
}

void RunPrepareHandlers() {
  for (int i = Recorded() - 1; i >= 0; --i) {
    if (void (*f)() = g_handlers[i].prepare.load(std::memory_order_acquire)) f();
  }
}

void RunParentHandlers() {
  for (int i = 0, n = Recorded(); i < n; ++i) {
    if (void (*f)() = g_handlers[i].parent.load(std::memory_order_acquire)) f();
  }
}

void RunChildHandlers() {
  for (int i = 0, n = Recorded(); i < n; ++i) {
    if (void (*f)() = g_handlers[i].child.load(std::memory_order_acquire)) f();
  }
}

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
