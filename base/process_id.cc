#include "base/process_id.h"
#include "base/after_fork.h"

#include <unistd.h>

#include <atomic>

namespace vsocket::sys {
namespace {

std::atomic<pid_t> g_pid{0};  // 0: not read yet

// Registered when the library loads, before any handler registered later
// that may use the pid (as base/pid_namespace.cc does).
const bool g_fork_hook = [] {
  ::vsocket::sys::AtFork(nullptr, nullptr, [] { g_pid.store(0, std::memory_order_release); });
  return true;
}();

}  // namespace

pid_t ThisProcessId() {
  pid_t pid = g_pid.load(std::memory_order_acquire);
  if (pid != 0) return pid;
  pid = ::getpid();
  g_pid.store(pid, std::memory_order_release);
  return pid;
}

}  // namespace vsocket::sys
