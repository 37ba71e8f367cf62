#include "preload/epoll_wait_loop.h"

#include <errno.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "preload/epoll_set.h"
#include "preload/epoll_tracking.h"
#include "preload/real_calls.h"
#include "vsocket/config.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/poller_slots.h"
#include "vsocket/signal_restart.h"
#include "vsocket/user_space_holds.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/wait.h"

namespace vsocket::preload {
namespace {

// The sleep after a spin: EINTR if a handler ran during the spin, else
// `sleep` with signals held until the kernel takes the mask
// (SignalsHeldForSleep), so that one arriving now still ends it.
int SleepUnlessSignalled(const SignalRestartWindow& signals, int epfd,
                         struct epoll_event* events, int maxevents,
                         int64_t timeout_ns, const sigset_t* sigmask,
                         EpollSleep sleep) {
  SignalsHeldForSleep held(signals, sigmask);
  if (held.delivered()) {
    errno = EINTR;
    return -1;
  }
  return sleep(epfd, events, maxevents, timeout_ns, held.sleep_mask(), nullptr);
}

// The kernel-only busy-poll, for busy-polled sets whose connections user
// space cannot watch this call (a set another thread is polling): non-
// sleeping epoll_pwait calls for up to the budget, then the caller's sleep.
int KernelSpinWait(int epfd, struct epoll_event* events, int maxevents,
                   int64_t timeout_ns, const sigset_t* sigmask,
                   EpollSleep sleep, const SignalRestartWindow& signals) {
  BeforeKernelWait();
  int64_t start = MonotonicNs();
  int64_t budget = int64_t{GetConfig().spin_us} * 1000;
  if (timeout_ns >= 0 && timeout_ns < budget) budget = timeout_ns;
  int ready = 0;
  bool found = SpinUntil(
      [&] {
        KernelEpollEntry kernel(epfd, /*sleeps=*/false);
        ready = real::epoll_pwait(epfd, events, maxevents, 0, sigmask);
        return ready != 0;
      },
      [&] { return signals.AnyDelivery(); }, static_cast<uint32_t>(budget));
  if (found) return ready;
  int64_t left = timeout_ns < 0 ? -1 : timeout_ns - (MonotonicNs() - start);
  return SleepUnlessSignalled(signals, epfd, events, maxevents,
                              timeout_ns < 0 ? -1 : (left < 0 ? 0 : left), sigmask,
                              sleep);
}

// Appends the kernel's ready events (without sleeping) to events[0, have)
// and merges any whose data equals an earlier one.  Returns the new count,
// or -1 with errno.
int AppendKernelEvents(int epfd, struct epoll_event* events, int have,
                       int maxevents, const sigset_t* sigmask) {
  if (have >= maxevents) return have;
  KernelEpollEntry kernel(epfd, /*sleeps=*/false);
  int got = real::epoll_pwait(epfd, events + have, maxevents - have, 0, sigmask);
  if (got < 0) return have > 0 ? have : -1;
  int count = have;
  for (int i = have; i < have + got; ++i) {
    int same = -1;
    for (int j = 0; j < have; ++j)
      if (events[j].data.u64 == events[i].data.u64) same = j;
    if (same >= 0) {
      events[same].events |= events[i].events;
    } else {
      events[count++] = events[i];
    }
  }
  return count;
}

}  // namespace

namespace {

// Returned by SpinOnce when a kernel sleep reported only connections below
// their SO_RCVLOWAT mark: the call goes on for *rest_ns.
constexpr int kBelowMarkOnly = -2;

// One spin and sleep of SpinningEpollWait; `signals` is the whole call's.
int SpinOnce(int epfd, struct epoll_event* events, int maxevents,
             int64_t timeout_ns, const sigset_t* sigmask, EpollSleep sleep,
             const SignalRestartWindow& signals, int64_t* rest_ns);

}  // namespace

int SpinningEpollWait(int epfd, struct epoll_event* events, int maxevents,
                      int64_t timeout_ns, const sigset_t* sigmask,
                      EpollSleep sleep) {
  // epoll_wait is never restarted after a handler (signal(7)): a delivery
  // at any point of the call is its EINTR, as the kernel's sleep would give.
  SignalRestartWindow signals;
  for (;;) {
    int ready = SpinOnce(epfd, events, maxevents, timeout_ns, sigmask, sleep,
                         signals, &timeout_ns);
    if (ready != kBelowMarkOnly) return ready;
  }
}

namespace {

int SpinOnce(int epfd, struct epoll_event* events, int maxevents,
             int64_t timeout_ns, const sigset_t* sigmask, EpollSleep sleep,
             const SignalRestartWindow& signals, int64_t* rest_ns) {
  BeforeWait();
  EpollSet* set = EpollSet::Find(epfd);
  if (!set || !set->fast_path() || maxevents <= 0) {
    // Sets that do not busy-poll, and arguments the kernel is to reject, as they are.
    if (timeout_ns != 0) BeforeKernelWait();
    // A handler run during vsocket's own steps (a thread's first sleep
    // allocates: hundreds of microseconds) is the call's EINTR; what is
    // left is the instant before the system call, as without vsocket.
    return sleep(epfd, events, maxevents, timeout_ns, sigmask,
                 timeout_ns != 0 ? &signals : nullptr);
  }
  std::unique_lock<std::mutex> lock(set->wait_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) {
    return timeout_ns == 0 ? sleep(epfd, events, maxevents, 0, sigmask, nullptr)
                           : KernelSpinWait(epfd, events, maxevents,
                                            timeout_ns, sigmask, sleep, signals);
  }
  // Ends the call's use of the set (its references, then the lock) once.
  struct CallEnd {
    EpollSet* set;
    std::unique_lock<std::mutex>* lock;
    void operator()() {
      if (!lock->owns_lock()) return;
      set->EndCall();
      lock->unlock();
    }
    ~CallEnd() { (*this)(); }
  } end_call{set, &lock};
  if (set->TakeRebuild()) set->Rebuild(RegistrationsIn(epfd));
  if (set->BeginCall() == 0) {
    end_call();
    return timeout_ns == 0 ? sleep(epfd, events, maxevents, 0, sigmask, nullptr)
                           : KernelSpinWait(epfd, events, maxevents,
                                            timeout_ns, sigmask, sleep, signals);
  }
  set->HoldAll();
  int64_t start = MonotonicNs();
  int64_t budget = int64_t{GetConfig().spin_us} * 1000;
  if (timeout_ns >= 0 && timeout_ns < budget) budget = timeout_ns;
  // Without a slot: one look, then the kernel.
  PollerSlot slot;
  if (!slot.taken()) budget = 0;
  PollerPacer pace(start, budget);
  for (bool waiting = false;; waiting = true) {
    int64_t now = pace.now();
    bool ask_kernel = false;
    int ready = 0;
    bool kernel_first = set->KernelDue(now, waiting);
    if (kernel_first) {
      ready = AppendKernelEvents(epfd, events, 0, maxevents, sigmask);
      if (ready < 0) return -1;
      set->NoteKernelLook(now);
    }
    ready = set->Collect(events, ready, maxevents, &ask_kernel);
    // A connection user space cannot answer for (end of stream, a move)
    // has just had its hang-up raised on its descriptor by Collect: ask
    // the kernel (again, after a first look that may predate the raise,
    // so EPOLLIN never comes without the EPOLLRDHUP that goes with it).
    if (ask_kernel || (!kernel_first && ready == 0 && timeout_ns == 0)) {
      int merged = AppendKernelEvents(epfd, events, ready, maxevents, sigmask);
      if (merged < 0) return -1;
      ready = set->DropKernelInWithoutData(events, merged);
      set->NoteKernelLook(now);
    }
    if (ready > 0) {
      set->NoteCallReturned();
      return ready;
    }
    if (timeout_ns == 0) return 0;
    if (signals.AnyDelivery()) {
      errno = EINTR;
      return -1;
    }
    if (budget == 0 || !pace.Next()) break;
  }
  // The budget is spent: give the holds back (arming every connection),
  // keep other threads' pollers from holding ours meanwhile, and sleep in
  // the kernel for the rest of the caller's timeout.
  int64_t left = -1;
  int ready, saved;
  {
    KernelSleepers sleepers;
    set->BeforeKernelSleep(&sleepers);
    end_call();
    BeforeKernelWait();
    if (timeout_ns >= 0) {
      left = timeout_ns - (MonotonicNs() - start);
      if (left < 0) left = 0;
    }
    ready = SleepUnlessSignalled(signals, epfd, events, maxevents, left, sigmask,
                                 sleep);
    saved = errno;
  }  // the sleep's count ends (a socket released here may touch errno)
  if (ready > 0 && set->has_marks()) {
    // SO_RCVLOWAT: the kernel reports a connection readable at its first
    // byte (the doorbell); below the mark that is no event.  If nothing
    // else was, the call goes on for the rest of its timeout.
    std::unique_lock<std::mutex> relock(set->wait_mutex(), std::try_to_lock);
    if (relock.owns_lock()) ready = set->DropInBelowMark(events, ready);
    if (ready == 0) {
      int64_t rest = timeout_ns < 0 ? -1 : timeout_ns - (MonotonicNs() - start);
      if (timeout_ns >= 0 && rest <= 0) return 0;
      *rest_ns = rest;
      return kBelowMarkOnly;
    }
    saved = errno;
  }
  errno = saved;
  return ready;
}

}  // namespace

}  // namespace vsocket::preload
