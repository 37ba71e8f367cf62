#include "vsocket/signal_restart.h"

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

}  // namespace vsocket
