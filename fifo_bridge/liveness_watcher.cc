#include "fifo_bridge/liveness_watcher.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <mutex>
#include <thread>
#include <unordered_map>

#include "vsocket/background_thread.h"
#include "vsocket/log.h"
#include "base/real_libc.h"

namespace vsocket::fifo {
namespace {

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
    struct epoll_event ev = {};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      VSOCKET_LOG(kWarn, "liveness watch failed: errno %d", errno);
  }

  void WatchSinkFd(int fd, LivenessTarget* target) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!EnsureStarted()) return;
    targets_[fd] = target;
    sinks_[fd] = true;
    struct epoll_event ev = {};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      VSOCKET_LOG(kWarn, "sink watch failed: errno %d", errno);
  }

  void Unwatch(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    sinks_.erase(fd);
    if (targets_.erase(fd) && epoll_fd_ >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  }

 private:
  Watcher() {
    pthread_atfork(nullptr, nullptr, [] {
      // The child shares the parent's epoll instance but not its thread:
      // forget both and re-watch what the child still holds.
      Watcher& w = Get();
      new (&w.mutex_) std::mutex();
      auto inherited = std::move(w.targets_);
      auto sinks = std::move(w.sinks_);
      w.targets_.clear();
      w.sinks_.clear();
      w.epoll_fd_ = -1;
      for (auto& [fd, target] : inherited) {
        if (sinks.count(fd)) {
          w.WatchSinkFd(fd, target);
        } else {
          w.Watch(fd, target);
        }
      }
    });
  }

  // REQUIRES: mutex_ held.
  bool EnsureStarted() {
    if (epoll_fd_ >= 0) return true;
    epoll_fd_ = sys::MovePrivate(::epoll_create1(EPOLL_CLOEXEC));
    if (epoll_fd_ < 0) return false;
    int epoll_fd = epoll_fd_;
    StartBackgroundThread([this, epoll_fd] { Run(epoll_fd); });
    return true;
  }

  void Run(int epoll_fd) {
    struct epoll_event events[16];
    for (;;) {
      int n = sys::epoll_wait(epoll_fd, events, 16, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (epoll_fd != epoll_fd_) return;  // we are a stale copy after fork
      for (int i = 0; i < n; ++i) {
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

  std::mutex mutex_;
  int epoll_fd_ = -1;
  std::unordered_map<int, LivenessTarget*> targets_;
  std::unordered_map<int, bool> sinks_;  // fds registered with WatchSinkFd
};

}  // namespace

void WatchLiveness(int fd, LivenessTarget* target) { Watcher::Get().Watch(fd, target); }
void UnwatchLiveness(int fd) { Watcher::Get().Unwatch(fd); }
void WatchSink(int fd, LivenessTarget* target) { Watcher::Get().WatchSinkFd(fd, target); }

}  // namespace vsocket::fifo
