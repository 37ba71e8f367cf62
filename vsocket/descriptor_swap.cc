#include "vsocket/descriptor_swap.h"

#include <atomic>

namespace vsocket {
namespace {
std::atomic<DescriptorSwapHook> g_hook{nullptr};
}  // namespace

void SetDescriptorSwapHook(DescriptorSwapHook hook) {
  g_hook.store(hook, std::memory_order_release);
}

void ReplaceUserDescriptor(int fd, void (*swap)(void*), void* arg) {
  DescriptorSwapHook hook = g_hook.load(std::memory_order_acquire);
  if (hook) {
    hook(fd, swap, arg);
  } else {
    swap(arg);
  }
}

}  // namespace vsocket
