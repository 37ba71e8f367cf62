// Installing a fault handler in front of the one a process already has,
// and passing on the faults it does not take.  For vsocket's guards
// (base/shared_file_fault_guard.h, base/user_copy_guard.h), which must
// never change what a fault they do not own does.
//
// Async-signal-safety: Forward runs in a signal handler (system calls and
// the saved action only).
#ifndef VSOCKET_BASE_SIGNAL_CHAIN_H_
#define VSOCKET_BASE_SIGNAL_CHAIN_H_

#include <signal.h>

namespace vsocket {

// The action that was installed for a signal before a guard's.
struct PreviousSignalHandler {
  struct sigaction action = {};  // written once, before the guard runs

  // Passes the signal on: to the previous handler if there was one; for
  // SIG_DFL, restores the default action so that a retried faulting
  // access ends the process as it would have (a signal sent with kill()
  // is raised again); SIG_IGN ignores a sent signal.
  void Forward(int sig, siginfo_t* info, void* context) const;
};

// Saves the current action for `sig` in *previous, then installs `handler`
// (SA_SIGINFO | SA_RESTART | SA_ONSTACK, empty mask), through libc's
// sigaction (never the interposer's).  False if either call failed.
// REQUIRES: called once per (sig, previous); *previous outlives the handler.
bool InstallInFront(int sig, void (*handler)(int, siginfo_t*, void*),
                    PreviousSignalHandler* previous);

// For the interposer's sigaction queries: when *sa is a guard installed by
// InstallInFront for `sig`, replaces it with the action the program had
// before (the guard is vsocket's, not the program's: a program that saved
// SIG_DFL and sees a function would think someone else handles the
// signal).  Async-signal-safe.
void ShowActionBeforeGuards(int sig, struct sigaction* sa);

}  // namespace vsocket

#endif  // VSOCKET_BASE_SIGNAL_CHAIN_H_
