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

#include <signal.h>

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

// Closes the window between a spin's last look at deliveries and the
// kernel sleep that follows it.  A handler that runs there (nginx's SIGTERM
// sets a flag and expects epoll_wait's EINTR) is otherwise followed by a
// sleep that nothing ends.  Holds every asynchronous signal of the calling
// thread from construction to destruction; the sleep takes sleep_mask()
// atomically (epoll_pwait, ppoll, pselect), as pselect(2) exists to do, so
// a signal pending by then ends it with EINTR.  SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGTRAP and SIGSYS are never held: a fault while held would kill.
// REQUIRES: on the thread of `window`; only the sleep runs while held.
class SignalsHeldForSleep {
 public:
  // `caller_mask`: the mask the caller asked to sleep with (epoll_pwait,
  // ppoll, pselect), nullptr for the thread's own.
  SignalsHeldForSleep(const SignalRestartWindow& window, const sigset_t* caller_mask);
  ~SignalsHeldForSleep();  // restores the thread's mask; keeps errno
  SignalsHeldForSleep(const SignalsHeldForSleep&) = delete;
  SignalsHeldForSleep& operator=(const SignalsHeldForSleep&) = delete;

  // A handler ran since the window opened: the call fails with EINTR
  // without sleeping.
  bool delivered() const { return delivered_; }
  // The mask to sleep with: the caller's, or the thread's before the hold
  // (nullptr, the current one, if the hold failed).
  const sigset_t* sleep_mask() const {
    return caller_mask_ || !held_ ? caller_mask_ : &saved_;
  }

 private:
  const sigset_t* caller_mask_;
  sigset_t saved_;
  bool held_ = false;
  bool delivered_ = false;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_SIGNAL_RESTART_H_
