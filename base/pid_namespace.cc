#include "base/pid_namespace.h"
#include "base/after_fork.h"

#include <pthread.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>

namespace vsocket::sys {
namespace {

constexpr uint64_t kUnread = ~uint64_t{0};
std::atomic<uint64_t> g_pid_namespace{kUnread};

// Registered when the library loads, so that it runs before any child
// handler registered later (the liveness watcher's names its wake socket
// from this value), and never from inside a fork handler (which would
// deadlock on glibc's atfork lock).
const bool g_fork_hook = [] {
  ::vsocket::sys::AtFork(nullptr, nullptr,
                 [] { g_pid_namespace.store(kUnread, std::memory_order_release); });
  return true;
}();

}  // namespace

uint64_t PidNamespaceId() {
  uint64_t id = g_pid_namespace.load(std::memory_order_acquire);
  if (id != kUnread) return id;
  struct stat st;
  id = ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  g_pid_namespace.store(id, std::memory_order_release);
  return id;
}

std::string PidNamespaceTag() {
  char tag[17];
  std::snprintf(tag, sizeof(tag), "%llx",
                static_cast<unsigned long long>(PidNamespaceId()));
  return tag;
}

}  // namespace vsocket::sys
