// Whether a vsocket wait that a signal interrupted should resume.
//
// The kernel restarts a blocked socket call (recv, send, ...) after a signal
// handler returns if the handler was installed with SA_RESTART and the
// socket has no SO_RCVTIMEO/SO_SNDTIMEO; otherwise the call fails with EINTR
// (signal(7)).  vsocket's own waits (poll() on a doorbell) are never
// restarted by the kernel, so it must decide itself.  The interposer sees
// every sigaction()/signal() and routes handled signals through a trampoline
// that reports each delivery here, with its handler's SA_RESTART flag.
// Without the interposer (explicit API only) nothing is reported and every
// interruption is EINTR, as before.
//
// Threading: the counters are per thread; a delivery interrupts the thread
// it runs on, which is the one that checks.
#ifndef VSOCKET_VSOCKET_SIGNAL_RESTART_H_
#define VSOCKET_VSOCKET_SIGNAL_RESTART_H_

#include <cstdint>

namespace vsocket {

// Called from a signal handler (async-signal-safe) for each delivery to the
// calling thread of a signal whose handler vsocket knows.
void NoteSignalDelivery(bool sa_restart);

// Brackets one blocking wait of the calling thread.
// REQUIRES: constructed and used on the thread that waits.
class SignalRestartWindow {
 public:
  SignalRestartWindow();
  // After the wait failed with EINTR: true when it should resume, i.e. the
  // socket has no timeout (`has_timeout` false) and every delivery since
  // construction was to an SA_RESTART handler (and there was at least one
  // known delivery: an unknown handler means EINTR).  Re-arms the window.
  bool ShouldRestart(bool has_timeout);
  // True when a known handler ran on this thread since construction (or
  // the last ShouldRestart).  For busy-poll loops that stand in for a call
  // the kernel would have interrupted (epoll_wait): a signal whose handler
  // ran during the spin must end the call with EINTR, or the program, having
  // set its flag in the handler, sleeps on (nginx ignored SIGTERM so).
  bool AnyDelivery() const {
    return DeliveriesSeen() != restarting_ + interrupting_;
  }

 private:
  static uint64_t DeliveriesSeen();  // both counters of this thread, summed
  uint64_t restarting_ = 0;
  uint64_t interrupting_ = 0;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_SIGNAL_RESTART_H_
