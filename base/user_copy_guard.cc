#include "base/user_copy_guard.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

#include "base/shared_file_fault_guard.h"
#include "base/signal_chain.h"

namespace vsocket {
namespace user_copy_internal {

__attribute__((tls_model("initial-exec"))) thread_local Frame* t_frame = nullptr;

bool RunGuarded(void (*run)(void*), void* arg) {
  Frame frame;
  Frame* outer = t_frame;
  // savemask 0: no sigprocmask on the fast path; the handler unblocks the
  // signal itself before it jumps.
  if (sigsetjmp(frame.env, 0) != 0) {
    t_frame = outer;
    return false;
  }
  t_frame = &frame;
  run(arg);
  t_frame = outer;
  return true;
}

}  // namespace user_copy_internal

namespace {

PreviousSignalHandler g_previous_segv;
PreviousSignalHandler g_previous_bus;

void Handler(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  // A page of one of vsocket's shared files (a ring) is its owner's to
  // replace, even in the middle of a guarded copy.
  if (sig == SIGBUS && RecoverSharedFileFault(info)) {
    errno = saved;
    return;
  }
  RecoverUserCopyFault(sig, info);
  errno = saved;
  (sig == SIGSEGV ? g_previous_segv : g_previous_bus).Forward(sig, info, context);
}

}  // namespace

void RecoverUserCopyFault(int sig, const siginfo_t* info) {
  using user_copy_internal::t_frame;
  if (sig != SIGSEGV && sig != SIGBUS) return;
  if (info == nullptr || info->si_code <= 0) return;  // sent, not a fault
  user_copy_internal::Frame* frame = t_frame;
  if (frame == nullptr) return;
  // The kernel blocked `sig` for the handler; the jump skips its return.
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  ::syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &unblock, nullptr, _NSIG / 8);
  siglongjmp(frame->env, 1);
}

void InstallUserCopyGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    InstallInFront(SIGSEGV, Handler, &g_previous_segv);
    InstallInFront(SIGBUS, Handler, &g_previous_bus);
  });
}

}  // namespace vsocket
