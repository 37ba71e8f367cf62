// The RDMA progress thread: one per process, started with the first RDMA
// connection or listener.  It sleeps in epoll_wait on descriptors that RDMA
// objects register (a channel's completion and CM event fds, a listener's CM
// fd) and calls the registered watcher when one is readable, so that
// completions, disconnects and connection requests are handled while the
// application sleeps in poll/epoll/accept on descriptors vsocket gave it.
//
// Contract: OnReadable() runs on the progress thread, one call at a time for
// the whole process; it must not block for long (bounded waits only).
// Threading: Watch/Unwatch are thread-safe.  After Unwatch() returns, the
// thread makes no new call for that watcher, but a call already running may
// finish (watchers are shared_ptr-owned, so it stays valid).
// Fork: the child has no progress thread; Watch/Unwatch are no-ops there
// (RDMA resources do not survive fork; see rdma_transport.h).
#ifndef VSOCKET_RDMA_BACKEND_PROGRESS_THREAD_H_
#define VSOCKET_RDMA_BACKEND_PROGRESS_THREAD_H_

#include <cstdint>
#include <memory>

namespace vsocket::rdma {

class ProgressWatcher {
 public:
  virtual ~ProgressWatcher() = default;
  // `fd` (one of those passed to Watch) is readable.
  virtual void OnReadable(int fd) = 0;
  // The delay given to ScheduleCheck() has passed.  Returns true to be
  // called again one delay later.  Same contract as OnReadable().
  virtual bool OnCheck() { return false; }
};

// Starts the thread if needed and watches `fd` (level-triggered) for
// `watcher`.  0 or -errno.
int Watch(int fd, std::shared_ptr<ProgressWatcher> watcher);
// Stops watching `fd`.
void Unwatch(int fd);

// Calls watcher->OnCheck() on the progress thread `delay_ns` from now, or
// up to kCheckEarlyNs sooner (one process-wide timer: checks due that close
// together run in one wake-up).  The thread holds only a weak reference.  A
// watcher scheduled twice is called twice: callers keep their own "pending"
// flag.  0 or -errno (no thread could be started; in a forked child).
int ScheduleCheck(const std::shared_ptr<ProgressWatcher>& watcher,
                  int64_t delay_ns);
inline constexpr int64_t kCheckEarlyNs = 1'000'000;

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_PROGRESS_THREAD_H_
