#include "vsocket/kernel_wait.h"

#include <atomic>

#include "vsocket/provider_registry.h"
#include "vsocket/user_space_holds.h"

namespace vsocket {
namespace {
std::atomic<bool> g_held_back{false};
// Written by every wait of every thread: a line of its own, so the
// g_held_back loads of other threads do not miss on it.
alignas(64) std::atomic<uint64_t> g_wait_epoch{0};
}  // namespace

uint64_t WaitEpoch() { return g_wait_epoch.load(std::memory_order_relaxed); }

void NoteHeldBackBytes() {
  if (!g_held_back.load(std::memory_order_relaxed))
    g_held_back.store(true, std::memory_order_release);
}

void BeforeWait() {
  // An atomic increment: a load and a store could put back a value other
  // threads had already moved past, and a reader comparing two samples
  // would miss the waits between them.
  g_wait_epoch.fetch_add(1, std::memory_order_relaxed);
  if (!g_held_back.load(std::memory_order_relaxed)) return;
  // Cleared first: bytes held back meanwhile set it again.
  g_held_back.store(false, std::memory_order_seq_cst);
  ProvidersFlushHeldBack();
}

void BeforeKernelWait() {
  BeforeWait();
  DropAllUserSpaceHolds();
  ProvidersBeforeKernelWait();
}

}  // namespace vsocket
