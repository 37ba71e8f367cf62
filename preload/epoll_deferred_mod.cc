#include "preload/epoll_deferred_mod.h"
#include "base/after_fork.h"

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "preload/epoll_spin.h"
#include "preload/epoll_tracking.h"
#include "preload/real_calls.h"
#include "vsocket/socket_table.h"
#include "vsocket/user_space_holds.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {

// What a deferred MOD may carry: the bits the kernel accepts in a MOD
// without a privilege (EPOLLWAKEUP needs one; EPOLLEXCLUSIVE is refused).
constexpr uint32_t kPlainBits = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLERR |
                                EPOLLHUP | EPOLLRDNORM | EPOLLRDBAND |
                                EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG |
                                EPOLLRDHUP | EPOLLET;

bool Plain(uint32_t events) { return (events & ~kPlainBits) == 0; }

bool SameEvent(const struct epoll_event& a, const struct epoll_event& b) {
  return a.events == b.events && a.data.u64 == b.data.u64;
}

// One descriptor's registration in one set: what the kernel has, and what
// the program asked for since (the tracking's view).
struct Pending {
  bool kernel_has;
  struct epoll_event kernel;
  bool want_has;
  struct epoll_event want;
};

// The deferred state of one epoll set.  Never destroyed: a thread may hold
// a pointer across a close of the set (it then applies changes that fail).
struct DeferredSet {
  std::mutex mu;
  std::unordered_map<int, Pending> pending;  // by descriptor
  int sleepers = 0;  // threads inside a sleeping kernel wait on the set

  // Makes the kernel's registrations what the program asked for, with the
  // fewest calls: none where they already are.  REQUIRES: mu held.
  void ApplyLocked(int epfd) {
    if (pending.empty()) return;
    int saved = errno;
    for (auto& [fd, p] : pending) ApplyOne(epfd, fd, &p);
    errno = saved;
    pending.clear();
  }

  // Errors (ENOENT, EBADF) mean closed or removed meanwhile: nothing to do.
  static void ApplyOne(int epfd, int fd, Pending* p) {
    if (p->want_has && !p->kernel_has) {
      real::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &p->want);
    } else if (!p->want_has && p->kernel_has) {
      real::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
    } else if (p->want_has && !SameEvent(p->want, p->kernel)) {
      real::epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &p->want);
    }
  }
};

std::atomic<DeferredSet*> g_sets[kMaxTrackedEpollFd];
// Numbers added to some epoll set since they were last closed: if such a
// number is a set, it is nested and defers nothing.  Bits, not sets, so
// that every pipe or timer added costs no allocation.
std::atomic<uint64_t> g_added[kMaxTrackedEpollFd / 64];

bool Nested(int epfd) {
  return g_added[epfd / 64].load(std::memory_order_acquire) & (uint64_t{1} << (epfd % 64));
}
// Sets ever given a DeferredSet, so that process-wide passes (fork, exec,
// a descriptor's close) skip the rest of the table.
std::atomic<int> g_highest{-1};

DeferredSet* Find(int epfd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return nullptr;
  return g_sets[epfd].load(std::memory_order_acquire);
}

DeferredSet* FindOrMake(int epfd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return nullptr;
  DeferredSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (set) return set;
  auto* made = new (std::nothrow) DeferredSet();
  if (!made) return nullptr;
  if (!g_sets[epfd].compare_exchange_strong(set, made, std::memory_order_acq_rel)) {
    delete made;
    return set;
  }
  int highest = g_highest.load(std::memory_order_relaxed);
  while (epfd > highest &&
         !g_highest.compare_exchange_weak(highest, epfd, std::memory_order_relaxed)) {
  }
  return made;
}

template <typename F>
void ForEachSet(F f) {
  int highest = g_highest.load(std::memory_order_acquire);
  for (int epfd = 0; epfd <= highest; ++epfd) {
    if (DeferredSet* set = g_sets[epfd].load(std::memory_order_acquire)) f(epfd, set);
  }
}

// Fork: the parent applies everything and holds every set's lock across
// the fork, so the child starts from the kernel's true state with
// unlocked, empty sets (its sleepers are the parent's threads: none).  The
// sets locked are remembered: one made by another thread meanwhile is not
// unlocked in the parent, and is reset in the child like the rest.
std::vector<DeferredSet*>* g_locked_for_fork = nullptr;  // prepare -> parent

void LockAllBeforeFork() {
  static std::vector<DeferredSet*> locked;  // made here, never in the child
  locked.clear();
  ForEachSet([](int epfd, DeferredSet* set) {
    set->mu.lock();
    set->ApplyLocked(epfd);
    locked.push_back(set);
  });
  g_locked_for_fork = &locked;
}
void UnlockAllInParent() {
  for (DeferredSet* set : *g_locked_for_fork) set->mu.unlock();
}
void ResetAllInChild() {
  ForEachSet([](int, DeferredSet* set) {
    new (&set->mu) std::mutex();
    set->pending.clear();
    set->sleepers = 0;
  });
}

}  // namespace

void InitEpollDeferredMods() {
  ::vsocket::sys::AtFork(LockAllBeforeFork, UnlockAllInParent, ResetAllInChild);
}

bool DeferEpollCtl(int epfd, int op, int fd, const struct epoll_event* event) {
  static const bool off = getenv("VSOCKET_EPOLL_DEFER") &&
                          std::strcmp(getenv("VSOCKET_EPOLL_DEFER"), "0") == 0;
  if (off || !FastPathEpollSet(epfd)) return false;
  if (op != EPOLL_CTL_DEL && (!event || !Plain(event->events))) return false;
  struct epoll_event registered{};
  bool has = TrackedRegistration(epfd, fd, &registered);
  // Where the kernel would refuse (EEXIST, ENOENT), it answers itself.
  if (has ? (op == EPOLL_CTL_ADD || !Plain(registered.events)) : op != EPOLL_CTL_ADD)
    return false;
  std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
  if (!vs || !WatchableTransport(*vs, fd)) return false;
  DeferredSet* set = FindOrMake(epfd);
  if (!set) return false;
  std::lock_guard<std::mutex> lock(set->mu);
  if (Nested(epfd) || set->sleepers > 0) {
    set->ApplyLocked(epfd);  // keep the order of the caller's changes
    return false;
  }
  auto [it, first] = set->pending.try_emplace(fd);
  Pending& p = it->second;
  if (first) {
    // Nothing pending: the kernel has what the tracking has.
    p.kernel_has = has;
    p.kernel = registered;
  }
  p.want_has = op != EPOLL_CTL_DEL;
  if (p.want_has) p.want = *event;
  return true;
}

void NoteAddedToEpollSet(int fd) {
  if (fd < 0 || fd >= kMaxTrackedEpollFd) return;
  g_added[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_acq_rel);
  DeferredSet* set = Find(fd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->mu);
  set->ApplyLocked(fd);
}

void DropDeferredMods(int fd) {
  ForEachSet([fd](int, DeferredSet* set) {
    std::lock_guard<std::mutex> lock(set->mu);
    set->pending.erase(fd);
  });
}

namespace {

// Applies and forgets what `set` (epoll descriptor `epfd`) holds for `fd`.
void ApplyPendingOf(int epfd, DeferredSet* set, int fd) {
  std::lock_guard<std::mutex> lock(set->mu);
  auto it = set->pending.find(fd);
  if (it == set->pending.end()) return;
  int saved = errno;
  DeferredSet::ApplyOne(epfd, fd, &it->second);
  errno = saved;
  set->pending.erase(it);
}

}  // namespace

void ApplyDeferredMods(int fd) {
  ForEachSet([fd](int epfd, DeferredSet* set) { ApplyPendingOf(epfd, set, fd); });
}

void ApplyDeferredMod(int epfd, int fd) {
  if (DeferredSet* set = Find(epfd)) ApplyPendingOf(epfd, set, fd);
}

void ForgetDeferredModsOfSet(int epfd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return;
  g_added[epfd / 64].fetch_and(~(uint64_t{1} << (epfd % 64)), std::memory_order_acq_rel);
  DeferredSet* set = Find(epfd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->mu);
  set->pending.clear();
}

void ApplyAllDeferredMods() {
  ForEachSet([](int epfd, DeferredSet* set) {
    std::lock_guard<std::mutex> lock(set->mu);
    set->ApplyLocked(epfd);
  });
}

KernelEpollEntry::KernelEpollEntry(int epfd, bool sleeps) {
  // A sleeper counts itself in any set, marked or not yet: a set marked
  // while it sleeps must not defer what it has to see.
  DeferredSet* set = sleeps ? FindOrMake(epfd) : Find(epfd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->mu);
  set->ApplyLocked(epfd);
  if (sleeps) {
    ++set->sleepers;
    set_ = set;
  }
}

KernelEpollEntry::~KernelEpollEntry() {
  if (!set_) return;
  auto* set = static_cast<DeferredSet*>(set_);
  std::lock_guard<std::mutex> lock(set->mu);
  --set->sleepers;
}

}  // namespace vsocket::preload
