// The wait behind epoll_wait, epoll_pwait and epoll_pwait2 (interpose_wait.cc).
//
// On a shared-memory connection a kernel sleep and wake-up (~20 us here)
// costs more than the whole transfer (~0.5 us), so for a set that busy-
// polls (epoll_set.h: marked, spinning on) the wait reads the set's
// watched connections from their rings (EpollSet::Collect) for up to
// VSOCKET_SPIN_US, looking at the kernel's part of the set every 16
// returns or 64 us (EpollSet::KernelDue), then sleeps in the kernel for
// the rest of the caller's timeout.  When no connection of the set can be
// watched this call (none with user-space readiness, or another thread
// polls the set) it busy-polls with non-sleeping epoll_pwait calls
// instead.  Other sets take the kernel's path after one load.
//
// One epoll_wait, in order: EpollSet::Find; wait_mutex() try-lock;
// TakeRebuild (+ Rebuild from the index's registrations, epoll_tracking.h);
// BeginCall; HoldAll; then per look KernelDue, kernel look (under
// KernelEpollEntry), Collect, DropKernelInWithoutData; on return EndCall;
// after the budget BeforeKernelSleep, EndCall, the kernel sleep, and
// DropInBelowMark for SO_RCVLOWAT.
//
// Thread safety: any thread; each call uses the set alone or not at all.
#ifndef VSOCKET_PRELOAD_EPOLL_WAIT_LOOP_H_
#define VSOCKET_PRELOAD_EPOLL_WAIT_LOOP_H_

#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include <cstdint>

namespace vsocket {
class SignalRestartWindow;
}  // namespace vsocket

namespace vsocket::preload {

// The caller's own wait, for `timeout_ns` (-1: forever), as epoll_wait,
// epoll_pwait or epoll_pwait2 would do it; with `sigmask` applied when
// non-null (epoll_wait's too: after a spin, the sleep takes the thread's
// mask atomically so that a signal held since the spin ends it).
// `call` (non-null): the call's deliveries so far; the sleep fails with
// EINTR instead when a handler ran, looked at just before the system call
// (after vsocket's own steps: a thread's first sleep allocates).
using EpollSleep = int (*)(int epfd, struct epoll_event* events,
                           int maxevents, int64_t timeout_ns,
                           const sigset_t* sigmask,
                           const SignalRestartWindow* call);

// Waits as `sleep` would for `timeout_ns`, but first, when `epfd`
// busy-polls, for up to the spin budget: from the rings of its watched
// connections, merged with non-sleeping epoll_pwait looks at the kernel
// (with `sigmask`, so a signal it unblocks still interrupts).
int SpinningEpollWait(int epfd, struct epoll_event* events, int maxevents,
                      int64_t timeout_ns, const sigset_t* sigmask,
                      EpollSleep sleep);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_WAIT_LOOP_H_
