#include "rdma_backend/progress_thread.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vsocket/background_thread.h"
#include "vsocket/log.h"
#include "vsocket/real_libc.h"

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

 private:
  ProgressThread() : owner_pid_(::getpid()) {}

  // REQUIRES: mutex_ held.
  bool Start() {
    int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return false;
    epoll_fd_ = sys::MovePrivate(fd);
    if (epoll_fd_ < 0) epoll_fd_ = fd;
    int epoll_fd = epoll_fd_;
    StartBackgroundThread([this, epoll_fd] { Run(epoll_fd); });
    return true;
  }

  void Run(int epoll_fd) {
    struct epoll_event events[32];
    std::vector<std::pair<int, std::shared_ptr<ProgressWatcher>>> ready;
    for (;;) {
      int n = ::epoll_wait(epoll_fd, events, 32, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        VSOCKET_LOG(kError, "rdma progress thread: epoll_wait: errno %d", errno);
        return;
      }
      ready.clear();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (int i = 0; i < n; ++i) {
          auto it = watchers_.find(events[i].data.fd);
          if (it != watchers_.end()) ready.emplace_back(it->first, it->second);
        }
      }
      // Outside the lock: a watcher takes its own lock, and its owner may
      // call Unwatch() while holding that lock.
      for (auto& [fd, watcher] : ready) watcher->OnReadable(fd);
    }
  }

  const pid_t owner_pid_;
  std::mutex mutex_;
  int epoll_fd_ = -1;
  std::unordered_map<int, std::shared_ptr<ProgressWatcher>> watchers_;
};

}  // namespace

int Watch(int fd, std::shared_ptr<ProgressWatcher> watcher) {
  return ProgressThread::Get().Watch(fd, std::move(watcher));
}

void Unwatch(int fd) { ProgressThread::Get().Unwatch(fd); }

}  // namespace vsocket::rdma
