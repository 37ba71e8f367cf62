// One background thread per process that notices a shared-memory peer's death
// while nobody is inside a vsocket call: it watches the kernel TCP liveness
// connection of every claimed connection and, on EOF or error, lets the
// transport mark the peer gone and wake its descriptor, so a plain
// poll()/epoll_wait() on it returns.  The thread sleeps in epoll_wait and
// costs nothing while connections are healthy; it starts with the first
// watched connection.  After fork() the child starts its own.
//
// Thread safety: Watch/Unwatch may be called from any thread.  Unwatch
// returns only when the watcher no longer uses the target.
#ifndef VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_
#define VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_

#include <cstdint>

namespace vsocket::fifo {

class LivenessTarget {
 public:
  virtual ~LivenessTarget() = default;
  // Called on the watcher thread when `fd` reported readable/hang-up.
  // Returns true to keep watching (the event was spurious).
  virtual bool OnLivenessEvent() = 0;
  // Called on the watcher thread when a datagram arrived in a watched sink.
  virtual void OnSinkEvent() {}
  // Called on the watcher thread once the deadline set with WatchDeadline
  // has passed (the deadline is then forgotten).  Returns the next deadline
  // to be called at (a periodic check), or 0 for none.  Must not call
  // WatchDeadline/UnwatchDeadline itself.
  virtual int64_t OnDeadline() { return 0; }
};

// REQUIRES: fd stays open until Unwatch(fd) returns.
void WatchLiveness(int fd, LivenessTarget* target);
void UnwatchLiveness(int fd);

// Edge-triggered: OnSinkEvent() runs once per burst of arrivals on `fd`.
// REQUIRES: fd stays open until UnwatchLiveness(fd) returns.
void WatchSink(int fd, LivenessTarget* target);

// Calls target->OnDeadline() on the watcher thread at `deadline_ns`
// (MonotonicNs), even while no application thread enters vsocket (a
// client asleep in poll() whose offer is never claimed).  One deadline per
// target; a new one replaces the old.  UnwatchDeadline returns only when
// the watcher no longer uses the target.
// REQUIRES: target stays alive until UnwatchDeadline(target) returns.
void WatchDeadline(LivenessTarget* target, int64_t deadline_ns);
void UnwatchDeadline(LivenessTarget* target);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_LIVENESS_WATCHER_H_
