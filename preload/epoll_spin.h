// epoll_wait for sets that hold a fast-path connection.
//
// An epoll program (redis, nginx, gloo) waits in epoll_wait between
// messages; on a shared-memory connection a kernel wake-up costs more than
// the whole transfer (a sleep and wake-up is ~20 µs here, the ring
// ~0.5 µs).  For a set that holds a shared-memory connection, epoll_wait
// reads its connections from their rings (epoll_user_set.h) for up to
// VSOCKET_SPIN_US, looking at the kernel's part of the set every 16
// returns or 64 µs, then sleeps in the kernel for the rest of the caller's
// timeout.  Sets whose connections user space cannot watch this call (RDMA,
// a set another thread is already polling) busy-poll with non-sleeping
// epoll_pwait calls instead.  Sets that never held one take the kernel's
// path after one bit test.
//
// A set is marked when a connected shared-memory socket is added to it
// (epoll_ctl, or connect() moving an earlier registration); the mark stays
// until the epoll descriptor is closed, even if the connection leaves the
// set (a few spins too many, never a missed event).  Descriptors at or
// above kMaxTrackedEpollFd are never marked.
//
// Thread safety: all functions may be called concurrently; marks are
// atomic bits.
#ifndef VSOCKET_PRELOAD_EPOLL_SPIN_H_
#define VSOCKET_PRELOAD_EPOLL_SPIN_H_

#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include <cstdint>

namespace vsocket {
class SignalRestartWindow;
}  // namespace vsocket

namespace vsocket::preload {

inline constexpr int kMaxTrackedEpollFd = 1 << 16;

// `fd` (a connected virtual socket) was just added to epoll set `epfd`:
// marks the set when fd's connection is on a fast path.
void NoteFastPathInEpollSet(int epfd, int fd);
// The number `fd` is being closed: if it was a marked set, unmark it.
void ForgetEpollSet(int fd);
// Whether waits on `epfd` busy-poll its connections (it is marked and
// spinning is on).
bool FastPathEpollSet(int epfd);

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

// Waits as `sleep` would for `timeout_ns`, but first, when `epfd` is
// marked, for up to the spin budget: from the rings of its watched
// connections, merged with non-sleeping epoll_pwait looks at the kernel
// (with `sigmask`, so a signal it unblocks still interrupts).
int SpinningEpollWait(int epfd, struct epoll_event* events, int maxevents,
                      int64_t timeout_ns, const sigset_t* sigmask,
                      EpollSleep sleep);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_SPIN_H_
