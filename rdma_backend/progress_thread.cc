#include "rdma_backend/progress_thread.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vsocket/background_thread.h"
#include "vsocket/log.h"
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
    checks_.push_back(watcher);
    if (delay_ns < check_delay_ns_ || check_delay_ns_ == 0) check_delay_ns_ = delay_ns;
    if (!timer_set_) SetTimer();
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

  // REQUIRES: mutex_ held, checks_ not empty.  One-shot timer.
  void SetTimer() {
    struct itimerspec its = {};
    int64_t ns = check_delay_ns_ > 0 ? check_delay_ns_ : 1;
    its.it_value.tv_sec = ns / 1'000'000'000;
    its.it_value.tv_nsec = ns % 1'000'000'000;
    timer_set_ = ::timerfd_settime(timer_fd_, 0, &its, nullptr) == 0;
  }

  // On the thread: the timer fired.  Runs every scheduled check outside the
  // lock (a check takes its watcher's lock, and watchers schedule while
  // holding theirs) and keeps those that ask to be called again.
  void RunChecks() {
    uint64_t expirations;
    (void)!sys::read(timer_fd_, &expirations, sizeof(expirations));
    std::vector<std::weak_ptr<ProgressWatcher>> due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due.swap(checks_);
      timer_set_ = false;
    }
    std::vector<std::weak_ptr<ProgressWatcher>> again;
    for (auto& weak : due) {
      if (auto watcher = weak.lock(); watcher && watcher->OnCheck())
        again.push_back(std::move(weak));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& weak : again) checks_.push_back(std::move(weak));
    if (checks_.empty()) {
      check_delay_ns_ = 0;
    } else if (!timer_set_) {
      SetTimer();
    }
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
  std::vector<std::weak_ptr<ProgressWatcher>> checks_;
  int64_t check_delay_ns_ = 0;  // shortest delay asked for by checks_
  bool timer_set_ = false;
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
