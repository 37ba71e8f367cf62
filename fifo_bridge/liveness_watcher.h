// One background thread per process that notices a shared-memory peer's death
// while nobody is inside a vsocket call: it watches the kernel TCP liveness
// connection of every claimed connection and, on EOF or error, lets the
// transport mark the peer gone and wake its descriptor, so a plain
// poll()/epoll_wait() on it returns.  The thread sleeps in epoll_wait and
// costs nothing while connections are healthy; it starts with the first
// watched connection.  After fork() the child starts its own.
//
// It also owns this process's wake socket: a Unix datagram socket bound to
// the abstract name "vsk1/P/<pidns>/<pid>" (rendezvous.h: WakeSocketName),
// where a peer process sends a datagram naming one of our connections
// ("<role><key>") when that connection needs a look while our application
// may sleep (a hang-up, a filler to drain, a move to TCP).  The doorbells
// send their wake-ups from it too (doorbell.h: ProcessWakeSocket).  It is
// open until the process execs or forks (the child closes the parent's and
// binds its own).  One socket per process instead of one per connection:
// docs/PROTOCOL.md, section 3.
//
// Thread safety: Watch/Unwatch may be called from any thread, but not
// while holding a lock that a target's callback takes (the thread calls
// them holding the watcher's mutex).  Unwatch returns only when the watcher
// no longer uses the target.
#ifndef VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_
#define VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace vsocket::fifo {

class LivenessTarget {
 public:
  virtual ~LivenessTarget() = default;
  // Called on the watcher thread when `fd` reported readable/hang-up.
  // Returns true to keep watching (the event was spurious).
  virtual bool OnLivenessEvent() = 0;
  // Called on the watcher thread when a datagram arrived in a watched sink.
  virtual void OnSinkEvent() {}
  // Called on the watcher thread when a datagram in the wake socket named
  // this target (WatchWakes).
  virtual void OnPeerWake() {}
  // Called on the watcher thread once the deadline set with WatchDeadline
  // has passed (the deadline is then forgotten).  Returns the next deadline
  // to be called at (a periodic check), or 0 for none.  Must not call
  // WatchDeadline/UnwatchDeadline itself.
  virtual int64_t OnDeadline() { return 0; }
  // Called from the process's exit() (an atexit handler, on the exiting
  // thread) for each target still watched: the process leaves without
  // having closed it.  The watcher's mutex is held (taken without waiting:
  // when another thread holds it, nothing is called).  Must not block or
  // call the watcher.  Not called on _exit, a fatal signal or exec.
  virtual void OnProcessExit() {}
};

// REQUIRES: fd stays open until Unwatch(fd) returns.
void WatchLiveness(int fd, LivenessTarget* target);
void UnwatchLiveness(int fd);

// Edge-triggered: OnSinkEvent() runs once per burst of arrivals on `fd`.
// REQUIRES: fd stays open until UnwatchLiveness(fd) returns.
void WatchSink(int fd, LivenessTarget* target);

// Datagrams in this process's wake socket whose payload is `name` call
// target->OnPeerWake() (spurious ones too: a hostile local process can send
// any name).  Starts the watcher, and so binds the wake socket.
// REQUIRES: target stays alive until UnwatchWakes(name, target) returns.
void WatchWakes(const std::string& name, LivenessTarget* target);
// Forgets `name` if it is still `target`'s (a new connection of the same
// name may have taken it since).
void UnwatchWakes(const std::string& name, LivenessTarget* target);

// True on the watcher thread (inside a target's callback).
bool OnWatcherThread();



// Calls target->OnDeadline() on the watcher thread at `deadline_ns`
// (MonotonicNs), even while no application thread enters vsocket (a
// client asleep in poll() whose offer is never claimed).  One deadline per
// target; a new one replaces the old.  UnwatchDeadline returns only when
// the watcher no longer uses the target.
// REQUIRES: target stays alive until UnwatchDeadline(target) returns.
void WatchDeadline(LivenessTarget* target, int64_t deadline_ns);
// As WatchDeadline, but a pending deadline earlier than `deadline_ns`
// stays (the target's OnDeadline then answers for both).
void WatchDeadlineBy(LivenessTarget* target, int64_t deadline_ns);
void UnwatchDeadline(LivenessTarget* target);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_
