#include "preload/epoll_set.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include <cstring>
#include <new>

#include "base/after_fork.h"
#include "preload/real_calls.h"
#include "vsocket/config.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {

std::atomic<EpollSet*> g_sets[kMaxTrackedEpollFd];
// The highest descriptor ever given a set, so that process-wide passes
// (fork, exec, a descriptor's close) skip the rest of the table.
std::atomic<int> g_highest{-1};
// Numbers added to some epoll set since they were last closed: if such a
// number is a set, it is nested and defers nothing.  Bits, not sets, so
// that every pipe or timer added costs no allocation.
std::atomic<uint64_t> g_added[kMaxTrackedEpollFd / 64];

bool InRange(int fd) { return fd >= 0 && fd < kMaxTrackedEpollFd; }

bool Nested(int epfd) {
  return g_added[epfd / 64].load(std::memory_order_acquire) &
         (uint64_t{1} << (epfd % 64));
}

template <typename F>
void ForEachSet(F f) {
  int highest = g_highest.load(std::memory_order_acquire);
  for (int epfd = 0; epfd <= highest; ++epfd) {
    if (EpollSet* set = g_sets[epfd].load(std::memory_order_acquire)) f(set);
  }
}

// The events user space can answer for; the rest come from the kernel.
constexpr uint32_t kUserSpaceEvents =
    EPOLLIN | EPOLLRDNORM | EPOLLOUT | EPOLLWRNORM;
constexpr uint32_t kIn = EPOLLIN | EPOLLRDNORM;

// Registrations user space answers for: ONESHOT and EXCLUSIVE ones, and
// those asking for neither direction, are the kernel's.
bool Watchable(uint32_t events) {
  return !(events & (EPOLLONESHOT | EPOLLEXCLUSIVE)) && (events & kUserSpaceEvents);
}

uint32_t ReadyMask(uint32_t registered, uint32_t poll_events) {
  uint32_t ready = 0;
  if (poll_events & POLLIN) ready |= EPOLLIN | EPOLLRDNORM;
  if (poll_events & POLLOUT) ready |= EPOLLOUT | EPOLLWRNORM;
  return ready & registered & kUserSpaceEvents;
}

// Closes the gaps left by events whose masks were cleared; returns how
// many remain.
int DropEmptyEvents(struct epoll_event* out, int count) {
  int kept = 0;
  for (int j = 0; j < count; ++j)
    if (out[j].events != 0) out[kept++] = out[j];
  return kept;
}

// What a deferred change may carry: the bits the kernel accepts in a MOD
// without a privilege (EPOLLWAKEUP needs one; EPOLLEXCLUSIVE is refused).
constexpr uint32_t kPlainBits = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLERR |
                                EPOLLHUP | EPOLLRDNORM | EPOLLRDBAND |
                                EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG |
                                EPOLLRDHUP | EPOLLET;

bool Plain(uint32_t events) { return (events & ~kPlainBits) == 0; }

bool SameEvent(const struct epoll_event& a, const struct epoll_event& b) {
  return a.events == b.events && a.data.u64 == b.data.u64;
}

bool DeferringOff() {
  static const bool off = getenv("VSOCKET_EPOLL_DEFER") &&
                          std::strcmp(getenv("VSOCKET_EPOLL_DEFER"), "0") == 0;
  return off;
}

// Fork: the sets whose kernel locks prepare took, to be unlocked in the
// parent (one made by another thread meanwhile is not locked).
std::vector<EpollSet*>* g_locked_for_fork = nullptr;  // prepare -> parent

}  // namespace

// ---- The sets ----

EpollSet* EpollSet::Find(int epfd) {
  if (!InRange(epfd)) return nullptr;
  return g_sets[epfd].load(std::memory_order_acquire);
}

EpollSet* EpollSet::For(int epfd) {
  if (!InRange(epfd)) return nullptr;
  EpollSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (set) return set;
  auto* made = new (std::nothrow) EpollSet(epfd);  // never destroyed
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

void EpollSet::InstallForkHandlers() {
  ::vsocket::sys::AtFork(
      [] {
        static std::vector<EpollSet*> locked;  // made here, never in the child
        locked.clear();
        ForEachSet([](EpollSet* set) {
          set->kernel_mu_.lock();
          set->ApplyKernelLocked();
          locked.push_back(set);
        });
        g_locked_for_fork = &locked;
      },
      [] {
        for (EpollSet* set : *g_locked_for_fork) set->kernel_mu_.unlock();
      },
      [] {
        int highest = g_highest.load(std::memory_order_relaxed);
        for (int epfd = 0; epfd <= highest; ++epfd) {
          EpollSet* old = g_sets[epfd].load(std::memory_order_relaxed);
          if (!old) continue;
          auto* fresh = new EpollSet(epfd);
          fresh->marked_.store(old->marked_.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
          g_sets[epfd].store(fresh, std::memory_order_relaxed);
        }
      });
}

void EpollSet::Closed(int fd) {
  if (!InRange(fd)) return;
  uint64_t bit = uint64_t{1} << (fd % 64);
  if (g_added[fd / 64].load(std::memory_order_relaxed) & bit)
    g_added[fd / 64].fetch_and(~bit, std::memory_order_acq_rel);
  EpollSet* set = Find(fd);
  if (!set) return;
  set->marked_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(set->kernel_mu_);
  set->pending_.clear();
}

void EpollSet::NoteAddedToEpollSet(int fd) {
  if (!InRange(fd)) return;
  g_added[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_acq_rel);
  EpollSet* set = Find(fd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->kernel_mu_);
  set->ApplyKernelLocked();
}

// ---- The mark ----

void EpollSet::NoteFastPath(int epfd, int fd) {
  if (!InRange(epfd) || GetConfig().spin_us == 0) return;
  EpollSet* set = Find(epfd);
  if (set && set->marked_.load(std::memory_order_relaxed)) return;
  auto vs = LookupSocket(fd);
  if (!vs || !WatchableTransport(*vs, fd)) return;
  if (!set) set = For(epfd);
  if (set) set->marked_.store(true, std::memory_order_relaxed);
}

bool EpollSet::fast_path() const {
  return marked_.load(std::memory_order_relaxed) && GetConfig().spin_us != 0;
}

// ---- Deferred kernel changes ----

EpollSet* EpollSet::MayDefer(int epfd, int op, const struct epoll_event* event) {
  EpollSet* set = Find(epfd);
  if (!set || DeferringOff() || !set->fast_path()) return nullptr;
  if (op != EPOLL_CTL_DEL && (!event || !Plain(event->events))) return nullptr;
  return set;
}

bool EpollSet::Defer(int op, int fd, const struct epoll_event* event,
                     const struct epoll_event* registered) {
  bool has = registered != nullptr;
  // Where the kernel would refuse (EEXIST, ENOENT), it answers itself.
  if (has ? (op == EPOLL_CTL_ADD || !Plain(registered->events)) : op != EPOLL_CTL_ADD)
    return false;
  std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
  if (!vs || !WatchableTransport(*vs, fd)) return false;
  std::lock_guard<std::mutex> lock(kernel_mu_);
  if (Nested(epfd_) || sleepers_ > 0) {
    ApplyKernelLocked();  // keep the order of the caller's changes
    return false;
  }
  auto [it, first] = pending_.try_emplace(fd);
  KernelPending& p = it->second;
  if (first) {
    // Nothing pending: the kernel has what the index has.
    p.kernel_has = has;
    if (has) p.kernel = *registered;
  }
  p.want_has = op != EPOLL_CTL_DEL;
  if (p.want_has) p.want = *event;
  return true;
}

void EpollSet::ApplyKernelOne(int fd, KernelPending& p) {
  // Errors (ENOENT, EBADF) mean closed or removed meanwhile: nothing to do.
  if (p.want_has && !p.kernel_has) {
    real::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &p.want);
  } else if (!p.want_has && p.kernel_has) {
    real::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  } else if (p.want_has && !SameEvent(p.want, p.kernel)) {
    real::epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &p.want);
  }
}

void EpollSet::ApplyKernelLocked() {
  if (pending_.empty()) return;
  int saved = errno;
  for (auto& [fd, p] : pending_) ApplyKernelOne(fd, p);
  errno = saved;
  pending_.clear();
}

void EpollSet::ApplyPending(int fd) {
  std::lock_guard<std::mutex> lock(kernel_mu_);
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  int saved = errno;
  ApplyKernelOne(fd, it->second);
  errno = saved;
  pending_.erase(it);
}

void EpollSet::ApplyPendingOf(int fd) {
  ForEachSet([fd](EpollSet* set) { set->ApplyPending(fd); });
}

void EpollSet::DropPendingOf(int fd) {
  ForEachSet([fd](EpollSet* set) {
    std::lock_guard<std::mutex> lock(set->kernel_mu_);
    set->pending_.erase(fd);
  });
}

void EpollSet::ApplyAllPending() {
  ForEachSet([](EpollSet* set) {
    std::lock_guard<std::mutex> lock(set->kernel_mu_);
    set->ApplyKernelLocked();
  });
}

KernelEpollEntry::KernelEpollEntry(int epfd, bool sleeps) {
  EpollSet* set = sleeps ? EpollSet::For(epfd) : EpollSet::Find(epfd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->kernel_mu_);
  set->ApplyKernelLocked();
  if (sleeps) {
    ++set->sleepers_;
    set_ = set;
  }
}

KernelEpollEntry::~KernelEpollEntry() {
  if (!set_) return;
  std::lock_guard<std::mutex> lock(set_->kernel_mu_);
  --set_->sleepers_;
}

// ---- Entry changes ----

void EpollSet::Queue(const QueuedChange& change) {
  std::lock_guard<std::mutex> lock(changes_mu_);
  if (reset_.load(std::memory_order_relaxed)) return;  // the rebuild will see it
  changes_.push_back(change);
  has_changes_.store(true, std::memory_order_release);
}

void EpollSet::NoteChange(int epfd, int fd, Change change,
                          const struct epoll_event* event) {
  EpollSet* set = Find(epfd);
  if (!set) return;
  QueuedChange q{fd,
                 change == Change::kAdd      ? Queued::kAdd
                 : change == Change::kModify ? Queued::kModify
                                             : Queued::kRemove,
                 {}};
  if (event) q.event = *event;
  set->Queue(q);
}

void EpollSet::NoteKept(int epfd, int fd, int key, const struct epoll_event& event,
                        const std::shared_ptr<VirtualSocket>& socket) {
  EpollSet* set = Find(epfd);
  if (!set) return;
  set->Queue(QueuedChange{fd, Queued::kKeep, event, key, socket});
}

void EpollSet::NoteReset(int epfd) {
  EpollSet* set = Find(epfd);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->changes_mu_);
  set->changes_.clear();
  set->reset_.store(true, std::memory_order_relaxed);
  set->has_changes_.store(true, std::memory_order_release);
}

// ---- One wait's use of the entries ----

bool EpollSet::MakeEntry(int fd, const struct epoll_event& event,
                         Entry* entry, std::shared_ptr<VirtualSocket> vs) {
  if (!Watchable(event.events)) return false;
  if (!vs) vs = LookupSocket(fd);
  if (!vs || !WatchableTransport(*vs, fd)) return false;
  *entry = Entry{fd, event, vs};
  return true;
}

void EpollSet::RemoveEntry(int fd) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].fd != fd) continue;
    entries_[i] = std::move(entries_.back());
    entries_.pop_back();
    return;
  }
}

bool EpollSet::TakeRebuild() {
  if (!reset_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(changes_mu_);
  // Changes queued from now on are applied after the rebuild; one that is
  // also in its snapshot is applied twice, which is harmless.
  changes_.clear();
  reset_.store(false, std::memory_order_relaxed);
  has_changes_.store(false, std::memory_order_relaxed);
  return true;
}

void EpollSet::Rebuild(const std::vector<Registration>& registrations) {
  entries_.clear();
  for (const Registration& reg : registrations) {
    Entry entry;
    std::shared_ptr<VirtualSocket> kept = reg.socket.lock();
    if (reg.fd < 0 && !kept) continue;  // kept for a socket now gone
    if (MakeEntry(reg.fd, reg.event, &entry, std::move(kept)))
      entries_.push_back(std::move(entry));
  }
  next_ = 0;
}

void EpollSet::ApplyChanges() {
  {
    // Both vectors keep their capacity: no allocation per change.
    std::lock_guard<std::mutex> lock(changes_mu_);
    applying_.swap(changes_);
    has_changes_.store(false, std::memory_order_relaxed);
  }
  for (const QueuedChange& p : applying_) {
    if (p.change == Queued::kModify) {
      bool found = false;
      for (Entry& e : entries_) {
        if (e.fd != p.fd) continue;
        found = true;
        bool still = Watchable(p.event.events);
        if (still) {
          // As the kernel's EPOLL_CTL_MOD: the current state is reported
          // again, once, even for EPOLLET.
          e.event = p.event;
          e.last_arrivals = ~uint64_t{0};
          e.last_writable = false;
        }
        if (!still) RemoveEntry(p.fd);
        break;
      }
      if (found) continue;
    }
    if (p.change == Queued::kRemove) {
      RemoveEntry(p.fd);
      continue;
    }
    if (p.change == Queued::kKeep) {
      // The number's entry now follows its socket, under the key.
      RemoveEntry(p.fd);
      Entry entry;
      std::shared_ptr<VirtualSocket> socket = p.socket.lock();
      if (socket && MakeEntry(p.key, p.event, &entry, std::move(socket)))
        entries_.push_back(std::move(entry));
      continue;
    }
    RemoveEntry(p.fd);
    Entry entry;
    if (MakeEntry(p.fd, p.event, &entry)) entries_.push_back(std::move(entry));
  }
  applying_.clear();
  if (next_ >= entries_.size()) next_ = 0;
}

int EpollSet::BeginCall() {
  if (has_changes_.load(std::memory_order_acquire)) ApplyChanges();
  live_.resize(entries_.size());
  int watched = 0;
  bool marks = false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Live& live = live_[i];
    live.socket = entries_[i].socket.lock();
    live.transport = nullptr;
    if (!live.socket) continue;
    marks |= live.socket->recv_lowat() > 1;
    // A connection that moved to another transport is left to the kernel
    // until the registrations change.
    Transport* t = WatchableTransport(*live.socket, entries_[i].fd);
    if (!t) continue;
    live.transport = t;
    ++watched;
  }
  if (marks != has_marks()) has_marks_.store(marks, std::memory_order_relaxed);
  return watched;
}

int EpollSet::DropInBelowMark(struct epoll_event* out, int count) {
  bool emptied = false;
  for (const Entry& e : entries_) {
    int j = 0;
    while (j < count && !(out[j].data.u64 == e.event.data.u64 && (out[j].events & kIn))) ++j;
    if (j == count) continue;
    std::shared_ptr<VirtualSocket> vs = e.socket.lock();
    if (!vs || vs->recv_lowat() <= 1) continue;
    Transport* t = WatchableTransport(*vs, e.fd);
    if (!t) continue;
    Transport::UserSpaceReadiness r = t->PollUserSpace(POLLIN);
    if (!r.exact || (r.events & POLLIN)) continue;
    int saved = errno;
    bool below = t->DropStaleWakeup();
    errno = saved;
    if (!below) continue;
    out[j].events &= ~kIn;
    emptied |= out[j].events == 0;
  }
  return emptied ? DropEmptyEvents(out, count) : count;
}

void EpollSet::EndCall() {
  for (Live& live : live_) {
    live.transport = nullptr;
    live.socket.reset();
  }
}

void EpollSet::HoldAll() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Live& live = live_[i];
    // Holding is about wake-ups for data: an entry that waits only for
    // room leaves the connection armed for whoever waits to read.
    if (!live.transport || !(entries_[i].event.events & kIn)) continue;
    if (live.transport->HoldForUserSpacePoll())
      NoteUserSpaceHold(live.socket, live.transport);
  }
}

int EpollSet::Collect(struct epoll_event* out, int have, int maxevents,
                      bool* ask_kernel) {
  size_t n = entries_.size();
  if (n == 0) return have;
  const int kernel_events = have;
  size_t start = next_ < n ? next_ : 0;
  for (Live& live : live_) live.exact = false;
  for (size_t k = 0; k < n; ++k) {
    size_t i = (start + k) % n;
    Live& live = live_[i];
    Transport* t = live.transport;
    if (!t) continue;
    Entry& e = entries_[i];
    uint32_t wanted = 0;
    if (e.event.events & kIn) wanted |= POLLIN;
    if (e.event.events & (EPOLLOUT | EPOLLWRNORM)) wanted |= POLLOUT;
    Transport::UserSpaceReadiness r = t->PollUserSpace(wanted);
    if (!r.exact) {
      *ask_kernel = true;
      continue;
    }
    live.exact = true;
    live.in_reported = false;
    uint32_t ready = ReadyMask(e.event.events, r.events);
    if (e.event.events & EPOLLET) {
      bool writable = ready & EPOLLOUT;
      bool edge = ((ready & EPOLLIN) && r.arrivals != e.last_arrivals) ||
                  (writable && !e.last_writable);
      if (!writable) e.last_writable = false;
      if (!edge) continue;
    } else if (ready == 0) {
      continue;
    }
    int slot = -1;
    for (int j = 0; j < kernel_events; ++j) {
      if (out[j].data.u64 == e.event.data.u64) slot = j;
    }
    if (slot >= 0) {
      out[slot].events |= ready;
    } else if (have < maxevents) {
      out[have].events = ready;
      out[have].data = e.event.data;
      ++have;
    } else {
      next_ = i;  // no room: this one comes first next time
      break;
    }
    live.in_reported = ready & kIn;
    e.last_arrivals = r.arrivals;
    e.last_writable = ready & EPOLLOUT;
    next_ = i + 1;
  }
  return DropKernelInWithoutData(out, have);
}

int EpollSet::DropKernelInWithoutData(struct epoll_event* out, int count) {
  bool emptied = false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Live& live = live_[i];
    if (!live.transport || !live.exact || live.in_reported) continue;
    for (int j = 0; j < count; ++j) {
      if (out[j].data.u64 != entries_[i].event.data.u64 || !(out[j].events & kIn))
        continue;
      out[j].events &= ~kIn;
      emptied |= out[j].events == 0;
    }
  }
  return emptied ? DropEmptyEvents(out, count) : count;
}

void EpollSet::BeforeKernelSleep(KernelSleepers* sleep) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Transport* t = live_[i].transport;
    if (t && (entries_[i].event.events & kIn)) sleep->Add(live_[i].socket, t);
  }
}

bool EpollSet::KernelDue(int64_t now_ns, bool waiting) const {
  return calls_since_kernel_ >= kKernelEveryCalls ||
         now_ns - last_kernel_ns_ >=
             (waiting ? kKernelWhileWaitingNs : kKernelEveryNs);
}

void EpollSet::NoteKernelLook(int64_t now_ns) {
  calls_since_kernel_ = 0;
  last_kernel_ns_ = now_ns;
}

}  // namespace vsocket::preload
