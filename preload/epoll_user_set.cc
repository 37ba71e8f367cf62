#include "preload/epoll_user_set.h"

#include <errno.h>
#include <poll.h>

#include <atomic>

#include "preload/epoll_spin.h"
#include "preload/epoll_tracking.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport.h"
#include "vsocket/user_space_holds.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {

std::atomic<EpollUserSet*> g_sets[kMaxTrackedEpollFd];

// The events user space can answer for; the rest come from the kernel.
constexpr uint32_t kUserSpaceEvents =
    EPOLLIN | EPOLLRDNORM | EPOLLOUT | EPOLLWRNORM;

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

}  // namespace

EpollUserSet* EpollUserSet::For(int epfd) {
  EpollUserSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (set) return set;
  auto* made = new EpollUserSet();  // never destroyed (see the header)
  if (g_sets[epfd].compare_exchange_strong(set, made,
                                           std::memory_order_acq_rel)) {
    return made;
  }
  delete made;
  return set;
}

void ReplaceEpollUserSetsInChild() {
  for (auto& slot : g_sets) {
    if (slot.load(std::memory_order_relaxed))
      slot.store(new EpollUserSet(), std::memory_order_relaxed);
  }
}

void EpollUserSet::NoteChange(int epfd, int fd, Change change,
                              const struct epoll_event* event) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return;
  EpollUserSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->changes_mu_);
  if (set->reset_) return;  // the rebuild will see it
  Pending p{fd, change, {}};
  if (event) p.event = *event;
  set->changes_.push_back(p);
  set->has_changes_.store(true, std::memory_order_release);
}

void EpollUserSet::NoteKept(int epfd, int fd, int key, const struct epoll_event& event,
                            const std::shared_ptr<VirtualSocket>& socket) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return;
  EpollUserSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->changes_mu_);
  if (set->reset_) return;  // the rebuild will see it
  Pending p{fd, Change::kKeep, event, key, socket};
  set->changes_.push_back(std::move(p));
  set->has_changes_.store(true, std::memory_order_release);
}

void EpollUserSet::NoteReset(int epfd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return;
  EpollUserSet* set = g_sets[epfd].load(std::memory_order_acquire);
  if (!set) return;
  std::lock_guard<std::mutex> lock(set->changes_mu_);
  set->changes_.clear();
  set->reset_ = true;
  set->has_changes_.store(true, std::memory_order_release);
}

bool EpollUserSet::MakeEntry(int fd, const struct epoll_event& event,
                             Entry* entry, std::shared_ptr<VirtualSocket> vs) {
  if (!Watchable(event.events)) return false;
  if (!vs) vs = LookupSocket(fd);
  if (!vs || !WatchableTransport(*vs, fd)) return false;
  *entry = Entry{fd, event, vs};
  return true;
}

void EpollUserSet::RemoveEntry(int fd) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].fd != fd) continue;
    entries_[i] = std::move(entries_.back());
    entries_.pop_back();
    return;
  }
}

void EpollUserSet::Rebuild(int epfd) {
  entries_.clear();
  for (const FdRegistration& reg : RegistrationsIn(epfd)) {
    Entry entry;
    std::shared_ptr<VirtualSocket> kept = reg.socket.lock();
    if (reg.fd < 0 && !kept) continue;  // kept for a socket now gone
    if (MakeEntry(reg.fd, reg.event, &entry, std::move(kept)))
      entries_.push_back(std::move(entry));
  }
  next_ = 0;
}

void EpollUserSet::ApplyChanges(int epfd) {
  std::vector<Pending> changes;
  bool reset;
  {
    std::lock_guard<std::mutex> lock(changes_mu_);
    changes.swap(changes_);
    reset = reset_;
    reset_ = false;
    has_changes_.store(false, std::memory_order_relaxed);
  }
  // A change queued between the swap and the rebuild's snapshot is in
  // both: applying it twice is harmless.
  if (reset) {
    Rebuild(epfd);
    return;
  }
  for (const Pending& p : changes) {
    if (p.change == Change::kModify) {
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
    if (p.change == Change::kRemove) {
      RemoveEntry(p.fd);
      continue;
    }
    if (p.change == Change::kKeep) {
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
  if (next_ >= entries_.size()) next_ = 0;
}

int EpollUserSet::BeginCall(int epfd) {
  if (has_changes_.load(std::memory_order_acquire)) ApplyChanges(epfd);
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

int EpollUserSet::DropInBelowMark(struct epoll_event* out, int count) {
  constexpr uint32_t kIn = EPOLLIN | EPOLLRDNORM;
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

void EpollUserSet::EndCall() {
  for (Live& live : live_) {
    live.transport = nullptr;
    live.socket.reset();
  }
}

void EpollUserSet::HoldAll() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Live& live = live_[i];
    // Holding is about wake-ups for data: an entry that waits only for
    // room leaves the connection armed for whoever waits to read.
    if (!live.transport || !(entries_[i].event.events & (EPOLLIN | EPOLLRDNORM)))
      continue;
    if (live.transport->HoldForUserSpacePoll())
      NoteUserSpaceHold(live.socket, live.transport);
  }
}

int EpollUserSet::Collect(struct epoll_event* out, int have, int maxevents,
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
    if (e.event.events & (EPOLLIN | EPOLLRDNORM)) wanted |= POLLIN;
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
    live.in_reported = ready & (EPOLLIN | EPOLLRDNORM);
    e.last_arrivals = r.arrivals;
    e.last_writable = ready & EPOLLOUT;
    next_ = i + 1;
  }
  return DropKernelInWithoutData(out, have);
}

int EpollUserSet::DropKernelInWithoutData(struct epoll_event* out, int count) {
  constexpr uint32_t kIn = EPOLLIN | EPOLLRDNORM;
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

void EpollUserSet::BeforeKernelSleep(KernelSleepers* sleep) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Transport* t = live_[i].transport;
    if (t && (entries_[i].event.events & (EPOLLIN | EPOLLRDNORM)))
      sleep->Add(live_[i].socket, t);
  }
}

bool EpollUserSet::KernelDue(int64_t now_ns, bool waiting) const {
  return calls_since_kernel_ >= kKernelEveryCalls ||
         now_ns - last_kernel_ns_ >=
             (waiting ? kKernelWhileWaitingNs : kKernelEveryNs);
}

void EpollUserSet::NoteKernelLook(int64_t now_ns) {
  calls_since_kernel_ = 0;
  last_kernel_ns_ = now_ns;
}

}  // namespace vsocket::preload
