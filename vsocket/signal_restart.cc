#include "vsocket/signal_restart.h"

#include <errno.h>
#include <pthread.h>

#include <initializer_list>

namespace vsocket {
namespace {

// initial-exec: no allocation on first use, so safe inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local volatile uint64_t
    t_restarting_deliveries = 0;
__attribute__((tls_model("initial-exec"))) thread_local volatile uint64_t
    t_interrupting_deliveries = 0;

}  // namespace

void NoteSignalDelivery(bool sa_restart) {
  if (sa_restart) {
    t_restarting_deliveries = t_restarting_deliveries + 1;
  } else {
    t_interrupting_deliveries = t_interrupting_deliveries + 1;
  }
}

SignalRestartWindow::SignalRestartWindow()
    : restarting_(t_restarting_deliveries),
      interrupting_(t_interrupting_deliveries) {}

uint64_t SignalRestartWindow::DeliveriesSeen() {
  return t_restarting_deliveries + t_interrupting_deliveries;
}

bool SignalRestartWindow::ShouldRestart(bool has_timeout) {
  bool any_restarting = t_restarting_deliveries != restarting_;
  bool any_interrupting = t_interrupting_deliveries != interrupting_;
  restarting_ = t_restarting_deliveries;
  interrupting_ = t_interrupting_deliveries;
  return !has_timeout && any_restarting && !any_interrupting;
}

SignalsHeldForSleep::SignalsHeldForSleep(const SignalRestartWindow& window,
                                         const sigset_t* caller_mask)
    : caller_mask_(caller_mask) {
  sigset_t hold;
  sigfillset(&hold);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&hold, sig);
  held_ = pthread_sigmask(SIG_BLOCK, &hold, &saved_) == 0;
  // Deliveries before the hold were counted; later ones wait for the sleep.
  delivered_ = window.AnyDelivery();
}

SignalsHeldForSleep::~SignalsHeldForSleep() {
  if (!held_) return;
  int saved_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  errno = saved_errno;
}

}  // namespace vsocket
