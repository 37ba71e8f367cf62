// epoll_ctl of fast-path connections, applied to the kernel lazily.
//
// Event-loop programs change their registrations around every write:
// redis-benchmark deletes and adds its connection twice and modifies it
// once per request (five epoll_ctl calls).  For a connection whose
// readiness the busy poll reads from its ring (epoll_user_set.h), the
// kernel's registration matters only when the kernel is asked: a kernel
// look, or a sleep.  So such an ADD, MOD or DEL updates the tracking and
// the user-space set at once and is remembered, newest state per (set,
// descriptor); the kernel gets it before the next kernel wait on that set
// (KernelEpollEntry) as one ADD, MOD or DEL, or nothing when the kernel
// already has that registration (a DEL then ADD of the same events, a MOD
// to the same mask).  The one difference a program could see: an EPOLLET
// registration removed and added again between two kernel looks does not
// report again what only the kernel reports (EPOLLRDHUP, EPOLLHUP,
// EPOLLERR); user-space readiness is reported again as the kernel would.
//
// A change is deferred only when all of these hold, else it is made at once:
//  - the set is busy-polled (epoll_spin.h marks it);
//  - the descriptor is a connection user space can watch, and the tracking
//    says the kernel would accept the call (ADD of an unregistered
//    descriptor, MOD or DEL of a registered one);
//  - old and new masks are plain (no EPOLLONESHOT, EPOLLEXCLUSIVE,
//    EPOLLWAKEUP or unknown bits), so the kernel could not refuse either;
//  - no thread sleeps in the kernel on this set (it would miss the change);
//  - the set was never added to another epoll set (whose kernel wait
//    would read the stale registration).
// Pending changes are applied before fork (so the child and the parent
// see the same kernel set) and before exec, and dropped when the
// descriptor is closed or moved.  VSOCKET_EPOLL_DEFER=0 turns this off.
//
// Thread safety: every function may be called from any thread.
#ifndef VSOCKET_PRELOAD_EPOLL_DEFERRED_MOD_H_
#define VSOCKET_PRELOAD_EPOLL_DEFERRED_MOD_H_

#include <sys/epoll.h>

namespace vsocket::preload {

// Installs the fork handlers.  Once, at load.
void InitEpollDeferredMods();

// epoll_ctl(epfd, op, fd, event) for one of our descriptors: true when it
// was remembered instead of made (the caller then records it in the
// tracking and returns 0); false: make it now.
bool DeferEpollCtl(int epfd, int op, int fd, const struct epoll_event* event);

// `fd` was added to an epoll set: if it is an epoll set itself, its
// deferred MODs are applied and it defers none from now on.
void NoteAddedToEpollSet(int fd);

// Drops what is pending for `fd` in every set (its number now names
// another object).
void DropDeferredMods(int fd);
// Applies what is pending for `fd` in every set, while `fd` still names
// the object (before its close, or before its registrations move), or in
// set `epfd` (before an epoll_ctl on it that is made now, so that the
// kernel answers it from the program's registrations).
void ApplyDeferredMods(int fd);
void ApplyDeferredMod(int epfd, int fd);
// The number `epfd` is being closed: forgets its pending MODs and marks.
void ForgetDeferredModsOfSet(int epfd);
// Applies every pending MOD of every set (before exec).
void ApplyAllDeferredMods();

// Scope of one kernel wait on `epfd` (epoll_wait/pwait/pwait2, or a look
// without sleeping): applies the set's pending MODs first and, when
// `sleeps`, keeps new ones from being deferred until it ends.
class KernelEpollEntry {
 public:
  KernelEpollEntry(int epfd, bool sleeps);
  ~KernelEpollEntry();
  KernelEpollEntry(const KernelEpollEntry&) = delete;
  KernelEpollEntry& operator=(const KernelEpollEntry&) = delete;

 private:
  void* set_ = nullptr;  // counted as a sleeper in it; null: not counted
};

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_DEFERRED_MOD_H_
