// Readiness calls.
//
// A virtual socket's descriptor is a real kernel object whose readiness the
// kernel reports itself, so every readiness call goes to the kernel.  Two
// wrappers add something:
//  - poll, ppoll, select, pselect (and the fortified __poll_chk,
//    __ppoll_chk) re-check a POLLIN that the kernel reports for a
//    shared-memory connection.  The doorbell protocol can leave a stale
//    wake-up behind (the reader consumed the data before the writer's wake-up
//    datagram landed), which makes the descriptor readable with nothing to
//    read; a program that reads a *blocking* socket after select() (iperf3,
//    socat) would then block, possibly forever.  A stale POLLIN is drained and
//    removed from the result, and the wait resumes if nothing else was ready.
//    Sets without virtual sockets only pay a scan of the returned entries up
//    to the highest descriptor that ever was a virtual socket, and nothing at
//    all while the process has never had one.
//  - epoll_ctl records the registrations of virtual sockets in the index
//    (epoll_tracking.h), and defers changes of watched connections in sets
//    that busy-poll (epoll_set.h).
//  - epoll_wait, epoll_pwait and epoll_pwait2 busy-poll sets that hold a
//    connection with user-space readiness before sleeping
//    (epoll_wait_loop.h).  Their events
//    carry the program's data, not descriptors, so a stale wake-up can show
//    there; an epoll program reading a non-blocking socket just gets EAGAIN.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include <cstdint>

#include "preload/descriptors.h"
#include "preload/epoll_set.h"
#include "preload/epoll_tracking.h"
#include "preload/epoll_wait_loop.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "vsocket/config.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/poll_user_space.h"
#include "vsocket/signal_restart.h"
#include "base/real_libc.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
namespace real = vsocket::preload::real;
using vsocket::preload::Ours;

extern "C" [[noreturn]] void __chk_fail(void);

namespace {

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// True when `fd` is a connection reported readable with nothing to read, no
// end of stream and no error; the stale wake-up is drained, so the
// descriptor stops being readable.
bool StaleReadable(int fd) {
  auto vs = vsocket::LookupSocket(fd);
  if (!vs || vs->state() != vsocket::VirtualSocket::State::kConnected) return false;
  vsocket::Transport* t = vs->TransportFinishingConnect(fd);
  if (!t) return false;
  int saved = errno;
  bool stale = t->DropStaleWakeup();
  errno = saved;
  return stale;
}

// Removes stale POLLINs from a poll result; returns the corrected count.
int DropStale(struct pollfd* fds, nfds_t nfds, int ready, int highest) {
  for (nfds_t i = 0; i < nfds; ++i) {
    int fd = fds[i].fd;
    if (!(fds[i].revents & (POLLIN | POLLRDNORM)) || fd > highest || !Ours(fd))
      continue;
    if (!StaleReadable(fd)) continue;
    fds[i].revents &= ~(POLLIN | POLLRDNORM);
    if (fds[i].revents == 0) --ready;
  }
  return ready;
}

// ms left until `deadline_ns` (-1: forever), rounded up.
int MsLeft(int64_t deadline_ns) {
  if (deadline_ns < 0) return -1;
  int64_t left = deadline_ns - NowNs();
  return left <= 0 ? 0 : static_cast<int>((left + 999999) / 1000000);
}

// PollUserSpace's look at the kernel's descriptors: ppoll past the
// interposer, zero timeout, the caller's sigmask.
int KernelLook(struct pollfd* fds, nfds_t nfds, const sigset_t* sigmask) {
  struct timespec zero = {0, 0};
  return real::ppoll(fds, nfds, &zero, sigmask);
}

// select() reports the time left in its timeout argument, as Linux does.
void StoreTimeLeft(struct timeval* timeout, int64_t left_ns) {
  timeout->tv_sec = left_ns / 1000000000;
  timeout->tv_usec = (left_ns % 1000000000) / 1000;
}

// ns left of `timeout_ns` (-1: forever) since `start_ns`.
int64_t NsLeft(int64_t timeout_ns, int64_t start_ns) {
  if (timeout_ns < 0) return -1;
  int64_t left = timeout_ns - (NowNs() - start_ns);
  return left < 0 ? 0 : left;
}

// The first sleep after a spin: EINTR if a handler ran during the spin,
// else ppoll with signals held until the kernel takes the mask
// (SignalsHeldForSleep), so that a signal arriving now still ends it.
int PpollAfterSpin(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                   const sigset_t* sigmask, const vsocket::SignalRestartWindow& signals) {
  vsocket::SignalsHeldForSleep held(signals, sigmask);
  if (held.delivered()) {
    errno = EINTR;
    return -1;
  }
  return real::ppoll(fds, nfds, timeout, held.sleep_mask());
}

// `call`: the deliveries since the call began (nullptr: none looked at);
// `spun`: the call spun first, and sleeps as PpollAfterSpin.  Without a
// spin, a handler run during vsocket's own steps is the call's EINTR too.
int PollInKernel(struct pollfd* fds, nfds_t nfds, int timeout_ms,
                 const vsocket::SignalRestartWindow* call = nullptr,
                 bool spun = false);

int Poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest >= 0) vsocket::BeforeWait();
  if (highest < 0 || vsocket::GetConfig().spin_us == 0)
    return PollInKernel(fds, nfds, timeout_ms);
  vsocket::PollUserSpace user(KernelLook);
  if (!user.Begin(fds, nfds, highest))
    return PollInKernel(fds, nfds, timeout_ms, &user.signals());
  int64_t start;
  if (int ready = user.AnswerFromFirstLook(fds, nfds, &start)) return ready;
  int64_t timeout_ns = timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1000000;
  int r = user.Spin(fds, nfds, timeout_ns, nullptr, start);
  if (r != vsocket::PollUserSpace::kSleep) return r;
  user.PrepareSleep();
  int64_t left = NsLeft(timeout_ns, start);
  return PollInKernel(fds, nfds,
                      left < 0 ? -1 : static_cast<int>((left + 999999) / 1000000),
                      &user.signals(), /*spun=*/true);
}

int PollInKernel(struct pollfd* fds, nfds_t nfds, int timeout_ms,
                 const vsocket::SignalRestartWindow* call, bool spun) {
  if (timeout_ms != 0) vsocket::BeforeKernelWait();
  int ready;
  if (spun) {
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    ready = PpollAfterSpin(fds, nfds, timeout_ms < 0 ? nullptr : &ts, nullptr, *call);
  } else if (timeout_ms != 0 && call && call->AnyDelivery()) {
    errno = EINTR;
    return -1;
  } else {
    ready = sys::poll(fds, nfds, timeout_ms);
  }
  int highest = vsocket::preload::HighestVirtualFd();
  if (ready <= 0 || highest < 0) return ready;
  int64_t deadline = timeout_ms < 0 ? -1 : NowNs() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    int left = DropStale(fds, nfds, ready, highest);
    if (left > 0 || left == ready) return left;
    int wait_ms = MsLeft(deadline);
    if (wait_ms == 0) return 0;
    ready = sys::poll(fds, nfds, wait_ms);
    if (ready <= 0) return ready;
  }
}

// `call` and `spun` as for PollInKernel.
int PpollInKernel(struct pollfd* fds, nfds_t nfds,
                  const struct timespec* timeout, const sigset_t* sigmask,
                  const vsocket::SignalRestartWindow* call = nullptr,
                  bool spun = false);

int Ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
          const sigset_t* sigmask) {
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest >= 0) vsocket::BeforeWait();
  // The kernel validates the timeout (EINVAL): let it see bad ones as given.
  bool valid = !timeout || (timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 &&
                            timeout->tv_nsec < 1000000000);
  if (highest < 0 || !valid || vsocket::GetConfig().spin_us == 0)
    return PpollInKernel(fds, nfds, timeout, sigmask);
  vsocket::PollUserSpace user(KernelLook);
  if (!user.Begin(fds, nfds, highest))
    return PpollInKernel(fds, nfds, timeout, sigmask, &user.signals());
  int64_t start;
  if (int ready = user.AnswerFromFirstLook(fds, nfds, &start)) return ready;
  int64_t timeout_ns =
      timeout ? int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec : -1;
  int r = user.Spin(fds, nfds, timeout_ns, sigmask, start);
  if (r != vsocket::PollUserSpace::kSleep) return r;
  user.PrepareSleep();
  int64_t left = NsLeft(timeout_ns, start);
  struct timespec rest = {static_cast<time_t>(left / 1000000000),
                          static_cast<long>(left % 1000000000)};
  return PpollInKernel(fds, nfds, left < 0 ? nullptr : &rest, sigmask,
                       &user.signals(), /*spun=*/true);
}

int PpollInKernel(struct pollfd* fds, nfds_t nfds,
                  const struct timespec* timeout, const sigset_t* sigmask,
                  const vsocket::SignalRestartWindow* call, bool spun) {
  const bool sleeps = !timeout || timeout->tv_sec != 0 || timeout->tv_nsec != 0;
  if (sleeps) vsocket::BeforeKernelWait();
  if (sleeps && !spun && call && call->AnyDelivery()) {
    errno = EINTR;
    return -1;
  }
  int ready = spun ? PpollAfterSpin(fds, nfds, timeout, sigmask, *call)
                   : real::ppoll(fds, nfds, timeout, sigmask);
  int highest = vsocket::preload::HighestVirtualFd();
  if (ready <= 0 || highest < 0) return ready;
  int64_t deadline =
      timeout ? NowNs() + int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec : -1;
  for (;;) {
    int left = DropStale(fds, nfds, ready, highest);
    if (left > 0 || left == ready) return left;
    struct timespec rest, *restp = nullptr;
    if (deadline >= 0) {
      int64_t ns = deadline - NowNs();
      if (ns <= 0) return 0;
      rest = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      restp = &rest;
    }
    ready = real::ppoll(fds, nfds, restp, sigmask);
    if (ready <= 0) return ready;
  }
}

// select()/pselect(): clears stale bits of `readfds`; returns the count.
int DropStaleBits(int nfds, fd_set* readfds, int ready, int highest) {
  int last = nfds - 1 < highest ? nfds - 1 : highest;
  for (int fd = 0; fd <= last; ++fd) {
    if (!FD_ISSET(fd, readfds) || !Ours(fd) || !StaleReadable(fd)) continue;
    FD_CLR(fd, readfds);
    --ready;
  }
  return ready;
}

// select() and pselect() over the user-space poll: 1 when it answered
// (*result is select's), 0 when the kernel must (nothing watched, or the
// budget was spent: then *left_ns is the time left and `sleep` counts the
// sleep until it is destroyed, and *spun is set: the sleep is then made as
// PselectAfterSpin).  When it looked, *left_ns is the time left
// of the timeout (all of it when the first look answered: no time passed
// that select could report).
int SelectInUserSpace(int nfds, fd_set* readfds, fd_set* writefds,
                      fd_set* exceptfds, int64_t timeout_ns,
                      const sigset_t* sigmask,
                      vsocket::PollUserSpace* sleep, int* result,
                      int64_t* left_ns, bool* spun) {
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest < 0 || nfds <= 0 || nfds > FD_SETSIZE ||
      vsocket::GetConfig().spin_us == 0) {
    return 0;
  }
  struct pollfd fds[FD_SETSIZE];
  nfds_t n = 0;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) events |= POLLPRI;
    if (events) fds[n++] = {fd, events, 0};
  }
  if (!sleep->Begin(fds, n, highest)) return 0;
  *left_ns = timeout_ns;
  int64_t start;
  int r = sleep->AnswerFromFirstLook(fds, n, &start);
  if (r == 0) {
    r = sleep->Spin(fds, n, timeout_ns, sigmask, start);
    *left_ns = NsLeft(timeout_ns, start);
  }
  if (r == vsocket::PollUserSpace::kSleep) {
    sleep->PrepareSleep();
    *spun = true;
    return 0;
  }
  if (r < 0) {
    *result = -1;
    return 1;
  }
  for (nfds_t i = 0; i < n; ++i) {
    // A bad descriptor is select's EBADF, which only the kernel gives.
    if (fds[i].revents & POLLNVAL) return 0;
  }
  int bits = 0;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  for (nfds_t i = 0; i < n; ++i) {
    short re = fds[i].revents;
    int fd = fds[i].fd;
    if (readfds && (fds[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(fd, readfds);
      ++bits;
    }
    if (writefds && (fds[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
      FD_SET(fd, writefds);
      ++bits;
    }
    if (exceptfds && (fds[i].events & POLLPRI) && (re & POLLPRI)) {
      FD_SET(fd, exceptfds);
      ++bits;
    }
  }
  *result = bits;
  return 1;
}

// select's and pselect's sleep after a spin (as PpollAfterSpin), for
// `left_ns` (-1: forever).  `select_timeout`: select's, which Linux
// updates to the time left; nullptr for pselect.
int PselectAfterSpin(int nfds, fd_set* readfds, fd_set* writefds,
                     fd_set* exceptfds, int64_t left_ns, const sigset_t* sigmask,
                     const vsocket::SignalRestartWindow& signals,
                     struct timeval* select_timeout) {
  int64_t start = NowNs();
  int ready;
  {
    vsocket::SignalsHeldForSleep held(signals, sigmask);
    if (held.delivered()) {
      errno = EINTR;
      ready = -1;
    } else {
      struct timespec rest = {static_cast<time_t>(left_ns / 1000000000),
                              static_cast<long>(left_ns % 1000000000)};
      ready = real::pselect(nfds, readfds, writefds, exceptfds,
                            left_ns < 0 ? nullptr : &rest, held.sleep_mask());
    }
  }
  if (select_timeout && left_ns >= 0) {
    int saved = errno;
    int64_t still = NsLeft(left_ns, start);
    StoreTimeLeft(select_timeout, still);
    errno = saved;
  }
  return ready;
}

// select() and pselect(): `wait(timeout)` runs the real call with the time
// left (nullptr: forever) on the caller's sets, which are restored first.
template <typename Wait>
int SelectChecked(int nfds, fd_set* readfds, fd_set* writefds,
                  fd_set* exceptfds, int64_t timeout_ns, Wait wait) {
  if (timeout_ns != 0) vsocket::BeforeKernelWait();
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest >= 0) vsocket::BeforeWait();
  if (highest < 0 || !readfds || nfds <= 0 || nfds > FD_SETSIZE)
    return wait(timeout_ns);
  fd_set want_r = *readfds, want_w, want_e;
  if (writefds) want_w = *writefds;
  if (exceptfds) want_e = *exceptfds;
  int64_t deadline = timeout_ns < 0 ? -1 : NowNs() + timeout_ns;
  int64_t left_ns = timeout_ns;
  for (;;) {
    int ready = wait(left_ns);
    if (ready <= 0) return ready;
    int left = DropStaleBits(nfds, readfds, ready, highest);
    if (left > 0 || left == ready) return left;
    if (deadline >= 0) {
      left_ns = deadline - NowNs();
      if (left_ns <= 0) return 0;
    }
    *readfds = want_r;
    if (writefds) *writefds = want_w;
    if (exceptfds) *exceptfds = want_e;
  }
}

}  // namespace

VSP_EXPORT int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  return Poll(fds, nfds, timeout_ms);
}

VSP_EXPORT int __poll_chk(struct pollfd* fds, nfds_t nfds, int timeout_ms,
                          size_t fdslen) {
  if (fdslen / sizeof(*fds) < nfds) __chk_fail();
  return Poll(fds, nfds, timeout_ms);
}

VSP_EXPORT int ppoll(struct pollfd* fds, nfds_t nfds,
                     const struct timespec* timeout, const sigset_t* sigmask) {
  return Ppoll(fds, nfds, timeout, sigmask);
}

VSP_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t nfds,
                           const struct timespec* timeout,
                           const sigset_t* sigmask, size_t fdslen) {
  if (fdslen / sizeof(*fds) < nfds) __chk_fail();
  return Ppoll(fds, nfds, timeout, sigmask);
}

VSP_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds,
                      fd_set* exceptfds, struct timeval* timeout) {
  int64_t timeout_ns =
      timeout ? int64_t{timeout->tv_sec} * 1000000000 + int64_t{timeout->tv_usec} * 1000
              : -1;
  vsocket::PollUserSpace user(KernelLook);
  int result = 0;
  int64_t start_left = timeout_ns;
  bool spun = false;
  if (!timeout || (timeout->tv_sec >= 0 && timeout->tv_usec >= 0)) {
    if (SelectInUserSpace(nfds, readfds, writefds, exceptfds, timeout_ns,
                          nullptr, &user, &result, &start_left, &spun)) {
      if (timeout && result >= 0) {
        // Linux reports the time left in *timeout.
        StoreTimeLeft(timeout, start_left);
      }
      return result;
    }
    if (timeout && start_left != timeout_ns) {
      // Linux reports the time left in *timeout.
      StoreTimeLeft(timeout, start_left);
      timeout_ns = start_left;
    }
  }
  return SelectChecked(nfds, readfds, writefds, exceptfds, timeout_ns,
                       [&](int64_t left_ns) {
                         if (spun) {
                           return PselectAfterSpin(nfds, readfds, writefds,
                                                   exceptfds, left_ns, nullptr,
                                                   user.signals(), timeout);
                         }
                         if (timeout && left_ns != timeout_ns) {
                           // Linux reports the time left in *timeout too.
                           StoreTimeLeft(timeout, left_ns);
                         }
                         return real::select(nfds, readfds, writefds, exceptfds,
                                             timeout);
                       });
}

VSP_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds,
                       fd_set* exceptfds, const struct timespec* timeout,
                       const sigset_t* sigmask) {
  int64_t timeout_ns =
      timeout ? int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec : -1;
  vsocket::PollUserSpace user(KernelLook);
  int result = 0;
  int64_t start_left = timeout_ns;
  bool spun = false;
  if (!timeout || (timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 &&
                   timeout->tv_nsec < 1000000000)) {
    if (SelectInUserSpace(nfds, readfds, writefds, exceptfds, timeout_ns,
                          sigmask, &user, &result, &start_left, &spun)) {
      return result;
    }
  }
  struct timespec shortened;
  if (timeout && start_left != timeout_ns) {
    shortened = {static_cast<time_t>(start_left / 1000000000),
                 static_cast<long>(start_left % 1000000000)};
    timeout = &shortened;
    timeout_ns = start_left;
  }
  return SelectChecked(nfds, readfds, writefds, exceptfds, timeout_ns,
                       [&](int64_t left_ns) {
                         if (spun) {
                           return PselectAfterSpin(nfds, readfds, writefds,
                                                   exceptfds, left_ns, sigmask,
                                                   user.signals(), nullptr);
                         }
                         struct timespec rest;
                         const struct timespec* restp = timeout;
                         if (timeout && left_ns != timeout_ns) {
                           rest = {static_cast<time_t>(left_ns / 1000000000),
                                   static_cast<long>(left_ns % 1000000000)};
                           restp = &rest;
                         }
                         return real::pselect(nfds, readfds, writefds, exceptfds,
                                              restp, sigmask);
                       });
}

VSP_EXPORT int epoll_ctl(int epfd, int op, int fd,
                         struct epoll_event* event) __THROW {
  using vsocket::preload::EpollSet;
  if (!Ours(fd)) {
    // A set put into another one stops deferring.
    if (op == EPOLL_CTL_ADD) EpollSet::NoteAddedToEpollSet(fd);
    return real::epoll_ctl(epfd, op, fd, event);
  }
  EpollSet* set = EpollSet::MayDefer(epfd, op, event);
  if (set) {
    struct epoll_event registered{};
    bool has = vsocket::preload::TrackedRegistration(epfd, fd, &registered);
    if (set->Defer(op, fd, event, has ? &registered : nullptr)) {
      vsocket::preload::NoteEpollCtl(epfd, op, fd, event);
      return 0;
    }
  }
  // Made now, after what is still pending for it.
  if (EpollSet* existing = EpollSet::Find(epfd)) existing->ApplyPending(fd);
  int rc = real::epoll_ctl(epfd, op, fd, event);
  if (rc == 0) {
    vsocket::preload::NoteEpollCtl(epfd, op, fd, event);
    if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) EpollSet::NoteFastPath(epfd, fd);
  }
  return rc;
}

namespace {

// The three kernel waits behind epoll_wait, epoll_pwait and epoll_pwait2,
// for a time in ns (-1: forever); ms are rounded up as the kernel does.
int MsFromNs(int64_t ns) {
  if (ns < 0) return -1;
  int64_t ms = (ns + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

// Each applies the set's deferred changes first (KernelEpollEntry,
// epoll_set.h), then sleeps in the kernel: EINTR instead when a handler
// ran during the call so far (epoll_wait_loop.h, EpollSleep).
bool SignalledBeforeSleep(const vsocket::SignalRestartWindow* call) {
  if (!call || !call->AnyDelivery()) return false;
  errno = EINTR;
  return true;
}

// epoll_wait's sleep: with a mask only after a spin (SignalsHeldForSleep).
int SleepEpollWait(int epfd, struct epoll_event* events, int maxevents,
                   int64_t ns, const sigset_t* sigmask,
                   const vsocket::SignalRestartWindow* call) {
  vsocket::preload::KernelEpollEntry kernel(epfd, ns != 0);
  if (SignalledBeforeSleep(call)) return -1;
  if (sigmask) return real::epoll_pwait(epfd, events, maxevents, MsFromNs(ns), sigmask);
  return real::epoll_wait(epfd, events, maxevents, MsFromNs(ns));
}

int SleepEpollPwait(int epfd, struct epoll_event* events, int maxevents,
                    int64_t ns, const sigset_t* sigmask,
                    const vsocket::SignalRestartWindow* call) {
  vsocket::preload::KernelEpollEntry kernel(epfd, ns != 0);
  if (SignalledBeforeSleep(call)) return -1;
  return real::epoll_pwait(epfd, events, maxevents, MsFromNs(ns), sigmask);
}

int SleepEpollPwait2(int epfd, struct epoll_event* events, int maxevents,
                     int64_t ns, const sigset_t* sigmask,
                     const vsocket::SignalRestartWindow* call) {
  vsocket::preload::KernelEpollEntry kernel(epfd, ns != 0);
  if (SignalledBeforeSleep(call)) return -1;
  struct timespec ts = {static_cast<time_t>(ns / 1000000000),
                        static_cast<long>(ns % 1000000000)};
  return real::epoll_pwait2(epfd, events, maxevents, ns < 0 ? nullptr : &ts,
                            sigmask);
}

int64_t NsFromMs(int timeout_ms) {
  return timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1000000;
}

}  // namespace

VSP_EXPORT int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
                          int timeout) {
  return vsocket::preload::SpinningEpollWait(epfd, events, maxevents,
                                             NsFromMs(timeout), nullptr,
                                             SleepEpollWait);
}

VSP_EXPORT int epoll_pwait(int epfd, struct epoll_event* events, int maxevents,
                           int timeout, const sigset_t* sigmask) {
  return vsocket::preload::SpinningEpollWait(epfd, events, maxevents,
                                             NsFromMs(timeout), sigmask,
                                             SleepEpollPwait);
}

VSP_EXPORT int epoll_pwait2(int epfd, struct epoll_event* events,
                            int maxevents, const struct timespec* timeout,
                            const sigset_t* sigmask) {
  // The kernel validates the timeout (EINVAL): let it see bad ones as given.
  if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                  timeout->tv_nsec >= 1000000000)) {
    return real::epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
  }
  int64_t ns = timeout ? int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec
                       : -1;
  return vsocket::preload::SpinningEpollWait(epfd, events, maxevents, ns,
                                             sigmask, SleepEpollPwait2);
}
