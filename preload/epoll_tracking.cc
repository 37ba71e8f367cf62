#include "preload/epoll_tracking.h"
#include "base/after_fork.h"

#include <errno.h>
#include <limits.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>

#include <pthread.h>

#include "preload/real_calls.h"
#include "vsocket/descriptor_swap.h"

namespace vsocket::preload {
namespace {

// A registration of a closed number whose open file lives on under
// another number (KeepRegistrationsOfClosedNumber).
struct Kept {
  int key;  // its descriptor in the sets
  int epfd;
  struct epoll_event event;
  std::weak_ptr<VirtualSocket> socket;
  const VirtualSocket* owner;  // compared only while the owner is alive
};

struct Tracked {
  std::mutex mutex;
  std::unordered_map<int, std::vector<EpollRegistration>> by_fd;
  std::vector<Kept> kept;
  int next_key = -2;  // -1 is no descriptor
};

Tracked& T() {
  static Tracked* tracked = new Tracked();  // never destroyed
  return *tracked;
}

// Lets close() skip the mutex in the common case of nothing tracked.
std::atomic<int> g_count{0};
// After any change to T().by_fd.  REQUIRES: T().mutex.
void Changed() {
  g_count.store(static_cast<int>(T().by_fd.size() + T().kept.size()),
                std::memory_order_relaxed);
}

// Removes the kept registrations `drop` says, telling their sets.
// REQUIRES: T().mutex.
template <typename Pred>
void RemoveKept(Pred drop) {
  auto& kept = T().kept;
  auto end = std::remove_if(kept.begin(), kept.end(), [&](const Kept& k) {
    if (!drop(k)) return false;
    EpollSet::NoteChange(k.epfd, k.key, EpollSet::Change::kRemove, nullptr);
    return true;
  });
  if (end == kept.end()) return;
  kept.erase(end, kept.end());
  Changed();
}

// The sets hear of each change under T().mutex, so that a set's rebuild
// (which reads T() under it) never misses one.
void TellSets(const std::vector<EpollRegistration>& regs, int fd) {
  for (const auto& r : regs)
    EpollSet::NoteChange(r.epfd, fd, EpollSet::Change::kRemove, nullptr);
}

}  // namespace

// The descriptor swap hook: registrations follow the number.
static void MoveRegistrationsAroundSwap(int fd, void (*swap)(void*), void* arg) {
  std::vector<EpollRegistration> regs = DetachEpollRegistrations(fd);
  swap(arg);
  if (!regs.empty()) RestoreEpollRegistrations(fd, regs);
}

void InitEpollTracking() {
  T();
  SetDescriptorSwapHook(MoveRegistrationsAroundSwap);
  ::vsocket::sys::AtFork([] { T().mutex.lock(); }, [] { T().mutex.unlock(); },
                 [] { new (&T().mutex) std::mutex(); });
  EpollSet::InstallForkHandlers();
}

void NoteEpollCtl(int epfd, int op, int fd, const struct epoll_event* event) {
  std::lock_guard<std::mutex> lock(T().mutex);
  auto& regs = T().by_fd[fd];
  auto it = regs.begin();
  while (it != regs.end() && it->epfd != epfd) ++it;
  if (op == EPOLL_CTL_DEL) {
    if (it != regs.end()) regs.erase(it);
    EpollSet::NoteChange(epfd, fd, EpollSet::Change::kRemove, nullptr);
  } else if (event) {
    if (it != regs.end()) {
      it->event = *event;
    } else if (op == EPOLL_CTL_ADD) {
      regs.push_back({epfd, *event});
    }
    EpollSet::NoteChange(epfd, fd,
                         op == EPOLL_CTL_MOD ? EpollSet::Change::kModify
                                             : EpollSet::Change::kAdd,
                         event);
  }
  if (regs.empty()) T().by_fd.erase(fd);
  Changed();
}

bool TrackedRegistration(int epfd, int fd, struct epoll_event* event) {
  std::lock_guard<std::mutex> lock(T().mutex);
  auto it = T().by_fd.find(fd);
  if (it == T().by_fd.end()) return false;
  for (const EpollRegistration& r : it->second) {
    if (r.epfd != epfd) continue;
    *event = r.event;
    return true;
  }
  return false;
}

std::vector<EpollRegistration> DetachEpollRegistrations(int fd) {
  EpollSet::ApplyPendingOf(fd);  // the kernel's registrations are the tracked ones
  if (g_count.load(std::memory_order_relaxed) == 0) return {};
  std::vector<EpollRegistration> regs;
  {
    std::lock_guard<std::mutex> lock(T().mutex);
    auto it = T().by_fd.find(fd);
    if (it == T().by_fd.end()) return {};
    regs = std::move(it->second);
    T().by_fd.erase(it);
    TellSets(regs, fd);
    Changed();
  }
  std::vector<EpollRegistration> detached;
  int saved = errno;
  for (const auto& r : regs) {
    // A registration that is no longer there (the set was closed, or the
    // application removed it behind our back) is not restored.
    if (real::epoll_ctl(r.epfd, EPOLL_CTL_DEL, fd, nullptr) == 0)
      detached.push_back(r);
  }
  errno = saved;
  return detached;
}

void RestoreEpollRegistrations(int fd,
                               const std::vector<EpollRegistration>& regs) {
  int saved = errno;
  for (const auto& r : regs) {
    struct epoll_event ev = r.event;
    if (real::epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
      NoteEpollCtl(r.epfd, EPOLL_CTL_ADD, fd, &r.event);
  }
  errno = saved;
}

void ForgetEpollSetRegistrations(int epfd) {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(T().mutex);
  EpollSet::NoteReset(epfd);
  for (auto it = T().by_fd.begin(); it != T().by_fd.end();) {
    auto& regs = it->second;
    regs.erase(std::remove_if(regs.begin(), regs.end(),
                              [epfd](const EpollRegistration& r) {
                                return r.epfd == epfd;
                              }),
               regs.end());
    it = regs.empty() ? T().by_fd.erase(it) : std::next(it);
  }
  RemoveKept([epfd](const Kept& k) { return k.epfd == epfd; });
  Changed();
}

void KeepRegistrationsOfClosedNumber(int fd,
                                     const std::shared_ptr<VirtualSocket>& socket) {
  EpollSet::DropPendingOf(fd);  // applied by the caller, or lost with the number
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(T().mutex);
  auto it = T().by_fd.find(fd);
  if (it == T().by_fd.end()) return;
  for (const EpollRegistration& r : it->second) {
    Tracked& t = T();
    int key = t.next_key;
    t.next_key = key == INT_MIN ? -2 : key - 1;
    t.kept.push_back({key, r.epfd, r.event, socket, socket.get()});
    EpollSet::NoteKept(r.epfd, fd, key, r.event, socket);
  }
  T().by_fd.erase(it);
  Changed();
}

void ForgetKeptRegistrations(const VirtualSocket* socket) {
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(T().mutex);
  if (T().kept.empty()) return;
  // Expired ones too: a socket whose last number was closed without us.
  RemoveKept([socket](const Kept& k) { return k.owner == socket || k.socket.expired(); });
}

void ForgetEpollRegistrations(int fd) {
  EpollSet::DropPendingOf(fd);
  if (g_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(T().mutex);
  auto it = T().by_fd.find(fd);
  if (it == T().by_fd.end()) return;
  TellSets(it->second, fd);
  T().by_fd.erase(it);
  Changed();
}

std::vector<EpollSet::Registration> RegistrationsIn(int epfd) {
  std::vector<EpollSet::Registration> found;
  if (g_count.load(std::memory_order_relaxed) == 0) return found;
  std::lock_guard<std::mutex> lock(T().mutex);
  for (const auto& [fd, regs] : T().by_fd) {
    for (const auto& r : regs)
      if (r.epfd == epfd) found.push_back({fd, r.event, {}});
  }
  for (const Kept& k : T().kept)
    if (k.epfd == epfd) found.push_back({k.key, k.event, k.socket});
  return found;
}

}  // namespace vsocket::preload
