#include "base/signal_chain.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "base/real_libc.h"

namespace vsocket {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

int LibcSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static std::atomic<SigactionFn> cache{nullptr};
  SigactionFn fn = sys::NextSymbol(&cache, "sigaction");
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  return fn(sig, act, old);
}

// Every guard installed, for ShowActionBeforeGuards.
struct InstalledGuard {
  std::atomic<int> sig{0};
  std::atomic<void (*)(int, siginfo_t*, void*)> handler{nullptr};
  std::atomic<const PreviousSignalHandler*> previous{nullptr};
};
constexpr int kMaxGuards = 8;
InstalledGuard g_guards[kMaxGuards];
std::atomic<int> g_guard_count{0};

}  // namespace

void ShowActionBeforeGuards(int sig, struct sigaction* sa) {
  // A guard installed over another shows the one below it, and so on.
  for (int depth = 0; depth < kMaxGuards; ++depth) {
    if (!(sa->sa_flags & SA_SIGINFO)) return;
    bool found = false;
    int n = g_guard_count.load(std::memory_order_acquire);
    for (int i = 0; i < n && i < kMaxGuards; ++i) {
      if (g_guards[i].sig.load(std::memory_order_acquire) == sig &&
          g_guards[i].handler.load(std::memory_order_acquire) == sa->sa_sigaction) {
        *sa = g_guards[i].previous.load(std::memory_order_acquire)->action;
        found = true;
        break;
      }
    }
    if (!found) return;
  }
}

void PreviousSignalHandler::Forward(int sig, siginfo_t* info, void* context) const {
  // sa_handler and sa_sigaction share storage: SIG_DFL/SIG_IGN whatever
  // the flags say.
  if (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
    if (action.sa_flags & SA_SIGINFO) {
      action.sa_sigaction(sig, info, context);
    } else {
      action.sa_handler(sig);
    }
    return;
  }
  bool sent = info->si_code <= 0;  // kill(), sigqueue(): not a fault
  if (sent && action.sa_handler == SIG_IGN) return;
  // The default action: for a fault, the retried access faults again; a
  // sent signal is raised again (blocked until this handler returns).
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  LibcSigaction(sig, &dfl, nullptr);
  if (sent) ::syscall(SYS_tgkill, ::getpid(), ::gettid(), sig);
}

bool InstallInFront(int sig, void (*handler)(int, siginfo_t*, void*),
                    PreviousSignalHandler* previous) {
  struct sigaction guard = {};
  guard.sa_sigaction = handler;
  guard.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&guard.sa_mask);
  // *previous is complete before the handler can run: query, then install.
  if (LibcSigaction(sig, nullptr, &previous->action) != 0) return false;
  int slot = g_guard_count.load(std::memory_order_relaxed);
  if (slot < kMaxGuards) {  // the callers' once-only installs: no race
    g_guards[slot].sig.store(sig, std::memory_order_relaxed);
    g_guards[slot].handler.store(handler, std::memory_order_relaxed);
    g_guards[slot].previous.store(previous, std::memory_order_relaxed);
    g_guard_count.store(slot + 1, std::memory_order_release);
  }
  return LibcSigaction(sig, &guard, nullptr) == 0;
}

}  // namespace vsocket
