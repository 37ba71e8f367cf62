#include "fifo_bridge/liveness_watcher.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vsocket/background_thread.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"
#include "base/after_fork.h"
#include "base/real_libc.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/rendezvous.h"

namespace vsocket::fifo {
namespace {

// True on the watcher thread, which holds the watcher's mutex while it runs
// targets' callbacks.
thread_local bool tl_on_watcher_thread = false;

// This process's wake socket (see liveness_watcher.h), or -1 if it cannot
// be made or its name is taken (the name carries the pid namespace, so only
// a process that got an old socket of this pid's without the fork handlers,
// a raw clone(), can hold it): peers then wake our wait sockets instead,
// which costs a spurious wake-up.
int OpenWakeSocket() {
  int fd = sys::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_un addr;
  socklen_t len = AbstractAddress(WakeSocketName(::getpid()), &addr);
  if (sys::bind(fd, reinterpret_cast<const struct sockaddr*>(&addr), len) != 0) {
    VSOCKET_LOG(kInfo, "no wake socket for this process: errno %d", errno);
    sys::close(fd);
    return -1;
  }
  // Every connection's pending wake-ups count against this one send
  // buffer until their readers drain them: as large as the system allows
  // (a send refused for room is retried from a socket of its own).
  int size = 4 << 20;
  sys::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  return sys::MovePrivate(fd);
}

class Watcher {
 public:
  static Watcher& Get() {
    static Watcher* watcher = new Watcher();  // never destroyed
    return *watcher;
  }

  void Watch(int fd, LivenessTarget* target) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!EnsureStarted()) return;
    targets_[fd] = target;
    AddToEpoll(fd, /*sink=*/false);
  }

  void WatchSinkFd(int fd, LivenessTarget* target) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!EnsureStarted()) return;
    targets_[fd] = target;
    sinks_[fd] = true;
    AddToEpoll(fd, /*sink=*/true);
  }

  // `keep_earlier`: a pending deadline before `deadline_ns` stays.
  void SetDeadline(LivenessTarget* target, int64_t deadline_ns, bool keep_earlier) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!EnsureStarted()) return;
    auto [it, added] = deadlines_.try_emplace(target, deadline_ns);
    if (!added && !(keep_earlier && it->second <= deadline_ns)) it->second = deadline_ns;
    deadline_ns = it->second;
    // Wake the thread only if it sleeps past the new deadline.  Claim
    // deadlines are now + a constant, so while one is pending each new
    // connection costs no system call and no thread wake-up.
    if (deadline_ns < sleeping_until_ns_) {
      sleeping_until_ns_ = deadline_ns;
      uint64_t one = 1;
      ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
      (void)ignored;
    }
  }

  void ClearDeadline(LivenessTarget* target) {
    std::lock_guard<std::mutex> lock(mutex_);
    deadlines_.erase(target);
  }

  void Unwatch(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    UnwatchLocked(fd);
  }

  void WatchWakeName(const std::string& name, LivenessTarget* target) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!EnsureStarted()) return;
    wake_names_[name] = target;
  }

  void UnwatchWakeName(const std::string& name, LivenessTarget* target) {
    if (tl_on_watcher_thread) {
      auto it = wake_names_.find(name);  // our mutex is held: see Run
      if (it != wake_names_.end() && it->second == target) wake_names_.erase(it);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = wake_names_.find(name);
    if (it != wake_names_.end() && it->second == target) wake_names_.erase(it);
  }

 private:
  Watcher() {
    ::vsocket::sys::AtFork(nullptr, nullptr, [] { Get().ForgetParentsThread(); });
    sys::RunInEachForkedChild(&Watcher::ResumeInForkedChild);
  }

  // Fork child handler: the child shares the parent's epoll instance and
  // wake socket but has none of its threads.  Only forgets them (memory and
  // one close): the thread starts in ResumeInForkedChild, once fork() has
  // returned (base/after_fork.h says why not here).  What the child
  // inherited (targets_, sinks_, deadlines_, wake_names_) stays listed.
  void ForgetParentsThread() {
    new (&mutex_) std::mutex();
    epoll_fd_ = -1;
    wake_fd_ = -1;  // the parent's: the child makes its own
    // The parent's wake socket names the parent: the child binds its own
    // and must not hold the parent's name past the parent's exit.
    if (wake_sock_ >= 0) sys::close(wake_sock_);
    wake_sock_ = -1;
    SetProcessWakeSocket(-1);
    sleeping_until_ns_ = INT64_MAX;
  }

  // In a forked child, after fork() returned: starts the child's thread if
  // it inherited anything to watch.  (A child that watches something new
  // first starts it there, EnsureStarted.)
  static void ResumeInForkedChild() {
    Watcher& w = Get();
    std::lock_guard<std::mutex> lock(w.mutex_);
    if (w.targets_.empty() && w.deadlines_.empty() && w.wake_names_.empty()) return;
    w.EnsureStarted();
  }

  // The atexit handler: OnProcessExit for every watched connection.
  static void AtExit() {
    Watcher& w = Get();
    std::unique_lock<std::mutex> lock(w.mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // a thread is inside a callback: skip
    for (auto& [fd, target] : w.targets_) {
      if (!w.sinks_.count(fd)) target->OnProcessExit();
    }
  }

  // REQUIRES: mutex_ held, epoll_fd_ >= 0.
  void AddToEpoll(int fd, bool sink) {
    struct epoll_event ev = {};
    ev.events = sink ? EPOLLIN | EPOLLET : EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      VSOCKET_LOG(kWarn, "%s watch failed: errno %d", sink ? "sink" : "liveness", errno);
  }

  // Makes the epoll instance, the wake socket and the thread if they do not
  // exist yet; in a forked child, the descriptors it inherited are watched
  // again.  REQUIRES: mutex_ held; not inside a fork handler.
  bool EnsureStarted() {
    if (epoll_fd_ >= 0) return true;
    static bool exit_hook = std::atexit(AtExit) == 0;  // once per process image
    (void)exit_hook;
    epoll_fd_ = sys::MovePrivate(::epoll_create1(EPOLL_CLOEXEC));
    if (epoll_fd_ < 0) return false;
    wake_fd_ = sys::MovePrivate(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (wake_fd_ >= 0) {
      struct epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.fd = wake_fd_;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    }
    wake_sock_ = OpenWakeSocket();
    SetProcessWakeSocket(wake_sock_);
    if (wake_sock_ >= 0) {
      struct epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.fd = wake_sock_;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_sock_, &ev);
    }
    for (auto& [fd, target] : targets_) AddToEpoll(fd, sinks_.count(fd) != 0);
    int epoll_fd = epoll_fd_;
    StartBackgroundThread([this, epoll_fd] { Run(epoll_fd); });
    return true;
  }

  void Run(int epoll_fd) {
    tl_on_watcher_thread = true;
    struct epoll_event events[16];
    for (;;) {
      int n = sys::epoll_wait(epoll_fd, events, 16, NextTimeoutMs());
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (epoll_fd != epoll_fd_) return;  // we are a stale copy after fork
      RunDueDeadlines();
      for (int i = 0; i < n; ++i) {
        if (events[i].data.fd == wake_fd_) {
          uint64_t count;
          ssize_t ignored = ::read(wake_fd_, &count, sizeof(count));
          (void)ignored;
          continue;
        }
        if (events[i].data.fd == wake_sock_) {
          ReadWakes();
          continue;
        }
        auto it = targets_.find(events[i].data.fd);
        if (it == targets_.end()) continue;
        if (sinks_.count(it->first)) {
          it->second->OnSinkEvent();
          continue;
        }
        if (it->second->OnLivenessEvent()) {
          struct epoll_event ev = {};
          ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
          ev.data.fd = it->first;
          ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, it->first, &ev);
        }
      }
    }
  }

  // REQUIRES: mutex_ held.
  void UnwatchLocked(int fd) {
    sinks_.erase(fd);
    if (targets_.erase(fd) && epoll_fd_ >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  }

  // Takes every datagram queued in the wake socket and calls OnPeerWake on
  // the targets they name (once per target per round).  REQUIRES: mutex_.
  void ReadWakes() {
    constexpr unsigned kBatch = 16;
    constexpr size_t kNameBytes = 256;  // "<role><key>": a key is < 100
    static char bufs[kBatch][kNameBytes];  // the watcher thread's only
    struct iovec iov[kBatch];
    struct mmsghdr msgs[kBatch];
    std::vector<LivenessTarget*> woken;
    for (int round = 0; round < 64; ++round) {
      std::memset(msgs, 0, sizeof(msgs));
      for (unsigned i = 0; i < kBatch; ++i) {
        iov[i] = {bufs[i], kNameBytes};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      int n = sys::recvmmsg(wake_sock_, msgs, kBatch, MSG_DONTWAIT, nullptr);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) {
        size_t len = std::min<size_t>(msgs[i].msg_len, kNameBytes);
        auto it = wake_names_.find(std::string(bufs[i], len));
        if (it != wake_names_.end() &&
            std::find(woken.begin(), woken.end(), it->second) == woken.end())
          woken.push_back(it->second);
      }
      if (n < static_cast<int>(kBatch)) break;
    }
    for (LivenessTarget* target : woken) target->OnPeerWake();
  }

  // Milliseconds until the nearest deadline (rounded up), or -1.
  // Records it in sleeping_until_ns_.  With no deadline left, the thread
  // still sleeps towards the last one it had if that is ahead: the next
  // connection's claim deadline, later than it, then costs no eventfd
  // write and no wake-up of this thread (one connection after another);
  // the thread wakes once there, finds nothing, and sleeps for good.
  int NextTimeoutMs() {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t now = MonotonicNs();
    int64_t nearest = INT64_MAX;
    for (auto& [target, at] : deadlines_) nearest = std::min(nearest, at);
    if (nearest == INT64_MAX && sleeping_until_ns_ > now) nearest = sleeping_until_ns_;
    sleeping_until_ns_ = nearest;
    if (nearest == INT64_MAX) return -1;
    int64_t left = nearest - now;
    if (left <= 0) return 0;
    return static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, 60000));
  }

  // REQUIRES: mutex_ held.
  void RunDueDeadlines() {
    if (deadlines_.empty()) return;
    int64_t now = MonotonicNs();
    std::vector<LivenessTarget*> due;
    for (auto it = deadlines_.begin(); it != deadlines_.end();) {
      if (it->second <= now) {
        due.push_back(it->first);
        it = deadlines_.erase(it);
      } else {
        ++it;
      }
    }
    for (LivenessTarget* target : due) {
      if (int64_t next = target->OnDeadline()) deadlines_[target] = next;
    }
  }

  std::mutex mutex_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: a new, earlier deadline shortens the sleep
  // The deadline the thread sleeps towards (INT64_MAX: none); guarded by
  // mutex_.  A wake-up may land early: the loop just recomputes.
  int64_t sleeping_until_ns_ = INT64_MAX;
  std::unordered_map<LivenessTarget*, int64_t> deadlines_;
  std::unordered_map<int, LivenessTarget*> targets_;
  std::unordered_map<int, bool> sinks_;  // fds registered with WatchSinkFd
  int wake_sock_ = -1;  // this process's wake socket, or -1
  std::unordered_map<std::string, LivenessTarget*> wake_names_;
};

}  // namespace

void WatchLiveness(int fd, LivenessTarget* target) { Watcher::Get().Watch(fd, target); }
void UnwatchLiveness(int fd) { Watcher::Get().Unwatch(fd); }
void WatchSink(int fd, LivenessTarget* target) { Watcher::Get().WatchSinkFd(fd, target); }
void WatchWakes(const std::string& name, LivenessTarget* target) {
  Watcher::Get().WatchWakeName(name, target);
}
void UnwatchWakes(const std::string& name, LivenessTarget* target) {
  Watcher::Get().UnwatchWakeName(name, target);
}
bool OnWatcherThread() { return tl_on_watcher_thread; }

void WatchDeadline(LivenessTarget* target, int64_t deadline_ns) {
  Watcher::Get().SetDeadline(target, deadline_ns, /*keep_earlier=*/false);
}
void WatchDeadlineBy(LivenessTarget* target, int64_t deadline_ns) {
  Watcher::Get().SetDeadline(target, deadline_ns, /*keep_earlier=*/true);
}
void UnwatchDeadline(LivenessTarget* target) { Watcher::Get().ClearDeadline(target); }

}  // namespace vsocket::fifo
