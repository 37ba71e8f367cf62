#include "preload/descriptors.h"
#include "base/after_fork.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "preload/epoll_set.h"
#include "preload/epoll_tracking.h"
#include "preload/real_calls.h"
#include "base/real_libc.h"
#include "vsocket/live_stats.h"
#include "vsocket/socket_table.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/vsocket.h"

namespace vsocket::preload {
namespace {

struct State {
  std::mutex mutex;
  // Only sockets that have more than one number appear here, with all of
  // their numbers.  Keys are erased before the socket can die, so a reused
  // address never finds a stale entry.
  std::unordered_map<const VirtualSocket*, std::vector<int>> aliases;
};

// Never destroyed: descriptors are closed from atexit handlers too.
State& St() {
  static State* state = new State();
  return *state;
}

std::atomic<int> g_highest{-1};
std::atomic<pid_t> g_owner_pid{0};

void AtForkPrepare() { St().mutex.lock(); }
void AtForkParent() { St().mutex.unlock(); }
void AtForkChild() {
  new (&St().mutex) std::mutex();  // the locker was the parent's thread
  g_owner_pid.store(::getpid(), std::memory_order_relaxed);
}

// REQUIRES: St().mutex held.  `fd` is about to stop referring to `vs`: if
// the transport names the connection by `fd` and another number remains,
// move the transport to that number first.
void BeforeNumberLost(int fd, VirtualSocket* vs) {
  auto it = St().aliases.find(vs);
  if (it == St().aliases.end()) return;
  int other = -1;
  for (int n : it->second) {
    if (n != fd) {
      other = n;
      break;
    }
  }
  if (other < 0 || vs->state() != VirtualSocket::State::kConnected) return;
  Transport* t = vs->TransportFinishingConnect(fd);
  if (t && t->user_fd() == fd) {
    t->MoveUserFd(other);
    vsocket::LiveSlotSetFd(t->live_slot(), other);  // what vsocket-stat shows
  }
}

// REQUIRES: St().mutex held.
void RemoveAlias(int fd, VirtualSocket* vs) {
  auto it = St().aliases.find(vs);
  if (it == St().aliases.end()) return;
  auto& numbers = it->second;
  numbers.erase(std::remove(numbers.begin(), numbers.end(), fd), numbers.end());
  if (numbers.size() <= 1) St().aliases.erase(it);
}

// REQUIRES: St().mutex held.  Whether a number other than `fd` names `vs`.
bool HasOtherNumber(int fd, const VirtualSocket* vs) {
  auto it = St().aliases.find(vs);
  if (it == St().aliases.end()) return false;
  for (int n : it->second)
    if (n != fd) return true;
  return false;
}

// REQUIRES: St().mutex held; `fd` names `vs` (also when the kernel already
// closed it), and the aliases still list it.  fd's epoll registrations as
// the kernel keeps them: they live on while another number keeps the open
// file (its last number takes the kept ones with it).
void EpollRegistrationsAfterNumberLost(int fd, const std::shared_ptr<VirtualSocket>& vs) {
  if (HasOtherNumber(fd, vs.get())) {
    KeepRegistrationsOfClosedNumber(fd, vs);
    return;
  }
  ForgetEpollRegistrations(fd);
  ForgetKeptRegistrations(vs.get());
}

// REQUIRES: St().mutex held.  `fd` no longer refers to `vs`, or does
// again at once (`same_file`: dup2 of another number of vs onto it, which
// leaves the kernel's registrations of fd as they are).  Returns the
// table's reference, to be dropped after the mutex is released.
std::shared_ptr<VirtualSocket> AfterNumberLost(int fd, const std::shared_ptr<VirtualSocket>& vs,
                                               bool same_file = false) {
  if (!same_file) EpollRegistrationsAfterNumberLost(fd, vs);
  RemoveAlias(fd, vs.get());
  return UnregisterSocket(fd);
}

// REQUIRES: St().mutex held.
void AddAlias(VirtualSocket* vs, int existing, int added) {
  auto& numbers = St().aliases[vs];
  if (numbers.empty()) numbers.push_back(existing);
  if (std::find(numbers.begin(), numbers.end(), added) == numbers.end())
    numbers.push_back(added);
}

int RealDup(DupOp op, int oldfd, int target, int flags) {
  switch (op) {
    case DupOp::kDup: return real::dup(oldfd);
    case DupOp::kDup2: return real::dup2(oldfd, target);
    case DupOp::kDup3: return sys::dup3(oldfd, target, flags);
    case DupOp::kDupFd: return sys::fcntl(oldfd, F_DUPFD, target);
    case DupOp::kDupFdCloexec: return sys::fcntl(oldfd, F_DUPFD_CLOEXEC, target);
  }
  errno = EINVAL;
  return -1;
}

// Drops references outside the mutex, keeping errno.
void Drop(std::shared_ptr<VirtualSocket>* a, std::shared_ptr<VirtualSocket>* b) {
  int saved = errno;
  a->reset();
  b->reset();
  errno = saved;
}

}  // namespace

void InitDescriptors() {
  St();
  InitEpollTracking();  // its fork handlers first: they run last in prepare
  g_owner_pid.store(::getpid(), std::memory_order_relaxed);
  ::vsocket::sys::AtFork(&AtForkPrepare, &AtForkParent, &AtForkChild);
}

void NoteVirtualFd(int fd) {
  int seen = g_highest.load(std::memory_order_relaxed);
  while (fd > seen &&
         !g_highest.compare_exchange_weak(seen, fd, std::memory_order_relaxed)) {
  }
}

void NoteAdoptedSocket(const std::shared_ptr<VirtualSocket>& vs,
                       const std::vector<int>& fds) {
  std::lock_guard<std::mutex> lock(St().mutex);
  for (int fd : fds) {
    RegisterSocket(fd, vs);
    NoteVirtualFd(fd);
    if (fd != fds.front()) AddAlias(vs.get(), fds.front(), fd);
  }
}

std::vector<int> NumbersOf(int fd) {
  std::lock_guard<std::mutex> lock(St().mutex);
  auto vs = LookupSocket(fd);
  if (!vs) return {};
  auto it = St().aliases.find(vs.get());
  if (it == St().aliases.end()) return {fd};
  return it->second;
}

int HighestVirtualFd() { return g_highest.load(std::memory_order_relaxed); }

int Duplicate(DupOp op, int oldfd, int target, int flags) {
  // A vfork child's numbers are its own, its tables its parent's: the new
  // number must not be recorded there (the parent would take its own,
  // unrelated descriptor of that number for the socket).
  if (SharesParentMemory()) return RealDup(op, oldfd, target, flags);
  std::shared_ptr<VirtualSocket> vs_old, vs_new, dropped;
  int result;
  {
    std::lock_guard<std::mutex> lock(St().mutex);
    vs_old = LookupSocket(oldfd);
    bool onto = op == DupOp::kDup2 || op == DupOp::kDup3;
    if (onto && target != oldfd) vs_new = LookupSocket(target);
    if (vs_new) {
      BeforeNumberLost(target, vs_new.get());
      // Before the number names the new object: changes the busy poll
      // deferred reach the registrations the kernel keeps (see close()).
      EpollSet::ApplyPendingOf(target);
    }
    result = RealDup(op, oldfd, target, flags);
    if (result >= 0) {
      if (vs_new) dropped = AfterNumberLost(target, vs_new, vs_new == vs_old);
      if (vs_old && result != oldfd) {
        RegisterSocket(result, vs_old);
        AddAlias(vs_old.get(), oldfd, result);
        NoteVirtualFd(result);
      }
    }
  }
  Drop(&vs_new, &dropped);
  return result;
}

int CloseDescriptor(int fd) {
  {
    std::shared_ptr<VirtualSocket> vs;
    std::lock_guard<std::mutex> lock(St().mutex);
    vs = LookupSocket(fd);
    if (vs) BeforeNumberLost(fd, vs.get());
    // A DEL the program made before closing reaches the kernel, which
    // would otherwise keep reporting the object while a dup holds it; an
    // ADD or MOD made before closing is the one the kernel keeps then.
    EpollSet::ApplyPendingOf(fd);
    if (vs) {
      EpollRegistrationsAfterNumberLost(fd, vs);
      RemoveAlias(fd, vs.get());
    } else {
      ForgetEpollRegistrations(fd);
    }
  }  // the reference is dropped here; vsocket_close drops the table's
  return vsocket_close(fd);
}

void ForgetDescriptor(int fd) {
  std::shared_ptr<VirtualSocket> vs, dropped;
  {
    std::lock_guard<std::mutex> lock(St().mutex);
    vs = LookupSocket(fd);
    if (vs) {
      BeforeNumberLost(fd, vs.get());
      EpollSet::ApplyPendingOf(fd);  // as close() does: the number still names it
      dropped = AfterNumberLost(fd, vs);
    }
  }
  Drop(&vs, &dropped);
}

bool SharesParentMemory() {
  pid_t owner = g_owner_pid.load(std::memory_order_relaxed);
  return owner != 0 && ::getpid() != owner;
}

}  // namespace vsocket::preload
