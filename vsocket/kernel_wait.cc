#include "vsocket/kernel_wait.h"

#include <atomic>

#include "vsocket/provider_registry.h"
#include "vsocket/user_space_holds.h"

namespace vsocket {
namespace {
std::atomic<bool> g_held_back{false};
}  // namespace

void NoteHeldBackBytes() {
  if (!g_held_back.load(std::memory_order_relaxed))
    g_held_back.store(true, std::memory_order_release);
}

void BeforeWait() {
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
