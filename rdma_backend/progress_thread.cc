#include "rdma_backend/progress_thread.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vsocket/background_thread.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"
#include "base/real_libc.h"

namespace vsocket::rdma {
namespace {

class ProgressThread {
 public:
  static ProgressThread& Get() {
    static ProgressThread* thread = new ProgressThread();  // never destroyed
    return *thread;
  }

  int Watch(int fd, std::shared_ptr<ProgressWatcher> watcher) {
    // A forked child must not take the lock (a parent thread may have held
    // it at fork) nor touch the parent's epoll instance, which it shares.
    if (owner_pid_ != ::getpid()) return -EOPNOTSUPP;
    std::lock_guard<std::mutex> lock(mutex_);
    if (epoll_fd_ < 0 && !Start()) return -errno;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      int err = errno;
      VSOCKET_LOG(kWarn, "rdma progress: watch fd %d: errno %d", fd, err);
      return -err;
    }
    watchers_[fd] = std::move(watcher);
    return 0;
  }

  void Unwatch(int fd) {
    if (owner_pid_ != ::getpid()) return;  // see Watch()
    std::lock_guard<std::mutex> lock(mutex_);
    if (watchers_.erase(fd) && epoll_fd_ >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  }

  int ScheduleCheck(const std::shared_ptr<ProgressWatcher>& watcher,
                    int64_t delay_ns) {
    if (owner_pid_ != ::getpid()) return -EOPNOTSUPP;  // see Watch()
    std::lock_guard<std::mutex> lock(mutex_);
    if (epoll_fd_ < 0 && !Start()) return -errno;
    int64_t due = MonotonicNs() + std::max<int64_t>(delay_ns, 1);
    checks_.push_back({watcher, delay_ns, due});
    // A timer that fires later would run this check late: move it.
    if (timer_due_ns_ == 0 || due < timer_due_ns_) SetTimer(due);
    return 0;
  }

 private:
  ProgressThread() : owner_pid_(::getpid()) {}

  // REQUIRES: mutex_ held.
  bool Start() {
    int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return false;
    int timer = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer < 0) {
      int err = errno;
      sys::close(fd);
      errno = err;
      return false;
    }
    epoll_fd_ = sys::MovePrivate(fd);
    if (epoll_fd_ < 0) epoll_fd_ = fd;
    timer_fd_ = sys::MovePrivate(timer);
    if (timer_fd_ < 0) timer_fd_ = timer;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.fd = timer_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev);
    int epoll_fd = epoll_fd_;
    StartBackgroundThread([this, epoll_fd] { Run(epoll_fd); });
    return true;
  }

  // REQUIRES: mutex_ held.  Arms the one-shot timer for `due_ns`
  // (CLOCK_MONOTONIC).
  void SetTimer(int64_t due_ns) {
    struct itimerspec its = {};
    its.it_value.tv_sec = due_ns / 1'000'000'000;
    its.it_value.tv_nsec = due_ns % 1'000'000'000;
    timer_due_ns_ =
        ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr) == 0 ? due_ns : 0;
  }

  // On the thread: the timer fired.  Runs every check due within
  // kCheckEarlyNs outside the lock (a check takes its watcher's lock, and
  // watchers schedule while holding theirs), keeps those that ask to be
  // called again (one delay from now), and arms the timer for the earliest
  // check left.
  void RunChecks() {
    uint64_t expirations;
    (void)!sys::read(timer_fd_, &expirations, sizeof(expirations));
    std::vector<Check> due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      int64_t horizon = MonotonicNs() + kCheckEarlyNs;
      auto later = std::partition(checks_.begin(), checks_.end(),
                                  [&](const Check& c) { return c.due_ns > horizon; });
      due.assign(std::make_move_iterator(later), std::make_move_iterator(checks_.end()));
      checks_.erase(later, checks_.end());
      timer_due_ns_ = 0;
    }
    std::vector<Check> again;
    for (Check& check : due) {
      if (auto watcher = check.watcher.lock(); watcher && watcher->OnCheck())
        again.push_back(std::move(check));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t now = MonotonicNs();
    for (Check& check : again) {
      check.due_ns = now + std::max<int64_t>(check.delay_ns, 1);
      checks_.push_back(std::move(check));
    }
    if (checks_.empty()) return;
    int64_t earliest = checks_.front().due_ns;
    for (const Check& c : checks_) earliest = std::min(earliest, c.due_ns);
    if (timer_due_ns_ == 0 || earliest < timer_due_ns_) SetTimer(earliest);
  }

  void Run(int epoll_fd) {
    // Named for top -H, perf and tests (rdma_transport_test counts its
    // wake-ups).
    pthread_setname_np(pthread_self(), "vsocket-rdma");
    struct epoll_event events[32];
    std::vector<std::pair<int, std::shared_ptr<ProgressWatcher>>> ready;
    for (;;) {
      int n = sys::epoll_wait(epoll_fd, events, 32, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        VSOCKET_LOG(kError, "rdma progress thread: epoll_wait: errno %d", errno);
        return;
      }
      ready.clear();
      bool timer_fired = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (int i = 0; i < n; ++i) {
          if (events[i].data.fd == timer_fd_) {
            timer_fired = true;
            continue;
          }
          auto it = watchers_.find(events[i].data.fd);
          if (it != watchers_.end()) ready.emplace_back(it->first, it->second);
        }
      }
      // Outside the lock: a watcher takes its own lock, and its owner may
      // call Unwatch() while holding that lock.
      for (auto& [fd, watcher] : ready) watcher->OnReadable(fd);
      if (timer_fired) RunChecks();
    }
  }

  const pid_t owner_pid_;
  std::mutex mutex_;
  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  std::unordered_map<int, std::shared_ptr<ProgressWatcher>> watchers_;
  // ScheduleCheck(): guarded by mutex_.
  struct Check {
    std::weak_ptr<ProgressWatcher> watcher;
    int64_t delay_ns;  // as asked for: the period of a check called again
    int64_t due_ns;    // CLOCK_MONOTONIC
  };
  std::vector<Check> checks_;
  int64_t timer_due_ns_ = 0;  // when the armed timer fires; 0: not armed
};

}  // namespace

int Watch(int fd, std::shared_ptr<ProgressWatcher> watcher) {
  return ProgressThread::Get().Watch(fd, std::move(watcher));
}

void Unwatch(int fd) { ProgressThread::Get().Unwatch(fd); }

int ScheduleCheck(const std::shared_ptr<ProgressWatcher>& watcher,
                  int64_t delay_ns) {
  return ProgressThread::Get().ScheduleCheck(watcher, delay_ns);
}

}  // namespace vsocket::rdma
