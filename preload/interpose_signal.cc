// sigaction, signal, bsd_signal, siginterrupt: lets vsocket honour
// SA_RESTART (vsocket/signal_restart.h).
//
// A blocked call on a shared-memory connection waits in poll(), which the
// kernel never restarts; kernel TCP's recv()/send() are restarted after an
// SA_RESTART handler.  To tell the two cases apart, every handler the
// application installs through these calls is installed in the kernel as
// one trampoline that reports the delivery (and its handler's SA_RESTART
// flag) to the calling thread's counters, then calls the application's
// handler with the arguments it expects.  Queries (oldact, signal()'s
// return value) report the application's own handler and flags, never the
// trampoline.  SIG_DFL/SIG_IGN pass through unchanged.  Handlers installed
// behind our back (a raw rt_sigaction system call, sysv_signal, sigset) are
// simply unknown: an interruption by them gives EINTR.
//
// Async-signal-safe: the table is a fixed array of atomics; no locks, no
// allocation.  Two threads racing to install handlers for the same signal
// may leave the table describing the loser's handler for one delivery.
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <atomic>

#include "preload/preload_internal.h"
#include "base/real_libc.h"
#include "base/shared_file_fault_guard.h"
#include "base/signal_chain.h"
#include "base/user_copy_guard.h"
#include "vsocket/signal_restart.h"

namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

int RealSigaction(int sig, const struct sigaction* act,
                  struct sigaction* oldact) {
  static std::atomic<SigactionFn> cache{nullptr};
  SigactionFn fn = vsocket::sys::NextSymbol(&cache, "sigaction");
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  return fn(sig, act, oldact);
}

// The application's handler for each signal while the trampoline stands in
// for it in the kernel.
struct AppHandler {
  std::atomic<void*> function{nullptr};  // sa_handler or sa_sigaction
  std::atomic<int> flags{0};             // the application's sa_flags
};
AppHandler g_handlers[_NSIG];

// Signals siginterrupt(sig, 1) asked not to restart: signal() then installs
// handlers without SA_RESTART, as glibc does.
std::atomic<bool> g_interrupting[_NSIG];

void Trampoline(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  // A SIGBUS from a shared file of vsocket's that lost its pages is
  // vsocket's to handle (base/shared_file_fault_guard.h), before the
  // program's.
  if (sig == SIGBUS && vsocket::RecoverSharedFileFault(info)) {
    errno = saved;
    return;
  }
  // A bad pointer given to a send or receive on a connection in user space
  // gets EFAULT, as from the kernel (base/user_copy_guard.h): the copy
  // resumes at its landing, or (a guarded copy) this does not return.
  if (vsocket::RecoverUserCopyFault(sig, info, context)) {
    errno = saved;
    return;
  }
  int flags = g_handlers[sig].flags.load(std::memory_order_acquire);
  void* function = g_handlers[sig].function.load(std::memory_order_acquire);
  vsocket::NoteSignalDelivery((flags & SA_RESTART) != 0);
  errno = saved;
  if (!function) return;
  if (flags & SA_SIGINFO) {
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(function)(sig, info,
                                                                 context);
  } else {
    reinterpret_cast<void (*)(int)>(function)(sig);
  }
}

bool IsTrampoline(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == Trampoline;
}

// sa_handler and sa_sigaction share storage (a union in glibc).
bool IsFunction(const struct sigaction& sa) {
  return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN &&
         sa.sa_handler != SIG_ERR;
}

// Rewrites a kernel-side action that is the trampoline into the
// application's view of it.
void ToApplicationView(int sig, const AppHandler& saved, struct sigaction* sa) {
  // vsocket's own fault guards are not the program's handlers either.
  vsocket::ShowActionBeforeGuards(sig, sa);
  if (!IsTrampoline(*sa)) return;
  int flags = saved.flags.load(std::memory_order_acquire);
  void* function = saved.function.load(std::memory_order_acquire);
  sa->sa_flags = flags;
  if (flags & SA_SIGINFO) {
    sa->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(function);
  } else {
    sa->sa_handler = reinterpret_cast<void (*)(int)>(function);
  }
  (void)sig;
}

int Sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  if (sig <= 0 || sig >= _NSIG || sig == SIGKILL || sig == SIGSTOP ||
      !act || !IsFunction(*act)) {
    // Invalid signals get the kernel's EINVAL; SIG_DFL/SIG_IGN and pure
    // queries need no trampoline.  The table entry is kept until replaced
    // (a delivery racing with the change still finds a handler).
    AppHandler before;
    if (sig > 0 && sig < _NSIG) {
      before.function.store(g_handlers[sig].function.load());
      before.flags.store(g_handlers[sig].flags.load());
    }
    int rc = RealSigaction(sig, act, oldact);
    if (rc == 0 && oldact) ToApplicationView(sig, before, oldact);
    return rc;
  }
  AppHandler before;
  before.function.store(g_handlers[sig].function.load());
  before.flags.store(g_handlers[sig].flags.load());
  void* function = (act->sa_flags & SA_SIGINFO)
                       ? reinterpret_cast<void*>(act->sa_sigaction)
                       : reinterpret_cast<void*>(act->sa_handler);
  // Publish the new handler before the kernel can deliver to it.
  g_handlers[sig].flags.store(act->sa_flags, std::memory_order_release);
  g_handlers[sig].function.store(function, std::memory_order_release);
  struct sigaction ours = *act;
  ours.sa_flags |= SA_SIGINFO;
  ours.sa_sigaction = Trampoline;
  struct sigaction old;
  int rc = RealSigaction(sig, &ours, &old);
  if (rc != 0) {
    int err = errno;
    g_handlers[sig].flags.store(before.flags.load());
    g_handlers[sig].function.store(before.function.load());
    errno = err;
    return rc;
  }
  if (oldact) {
    ToApplicationView(sig, before, &old);
    *oldact = old;
  }
  return 0;
}

// glibc's BSD signal(): SA_RESTART unless siginterrupt() said otherwise,
// and the signal itself blocked while its handler runs.
sighandler_t BsdSignal(int sig, sighandler_t handler) {
  if (sig <= 0 || sig >= _NSIG || handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act, old;
  memset(&act, 0, sizeof(act));
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  act.sa_flags = g_interrupting[sig].load() ? 0 : SA_RESTART;
  if (Sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return (old.sa_flags & SA_SIGINFO)
             ? reinterpret_cast<sighandler_t>(
                   reinterpret_cast<void*>(old.sa_sigaction))
             : old.sa_handler;
}

}  // namespace

VSP_EXPORT int sigaction(int sig, const struct sigaction* act,
                         struct sigaction* oldact) __THROW {
  return Sigaction(sig, act, oldact);
}

VSP_EXPORT sighandler_t signal(int sig, sighandler_t handler) __THROW {
  return BsdSignal(sig, handler);
}

VSP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) __THROW {
  return BsdSignal(sig, handler);
}

VSP_EXPORT int siginterrupt(int sig, int interrupt) __THROW {
  if (sig <= 0 || sig >= _NSIG) {
    errno = EINVAL;
    return -1;
  }
  struct sigaction act;
  if (Sigaction(sig, nullptr, &act) != 0) return -1;
  g_interrupting[sig].store(interrupt != 0);
  if (interrupt) {
    act.sa_flags &= ~SA_RESTART;
  } else {
    act.sa_flags |= SA_RESTART;
  }
  return Sigaction(sig, &act, nullptr);
}
