// Processes made without fork(): glibc's syscall() with SYS_clone or
// SYS_clone3, and glibc's clone(), without CLONE_VM.  The child inherits
// every connection but runs none of the fork handlers that count a forked
// child as a holder of its connections, so when the parent then closed
// its copy the connection was torn down under the child.  vsftpd starts
// each session so, in new namespaces (CLONE_NEWNET among them) where
// vsocket's abstract names do not reach.
//
// So the parent first moves every connected virtual socket to kernel TCP
// (reason `clone`, preload/move_to_tcp.h): both processes then share the
// kernel connection, exactly as without vsocket, and closing one copy
// never resets the other.  And vsocket's own fork handlers run around the
// clone (base/after_fork.h, AtFork): a lock one of vsocket's threads held
// at that moment would otherwise stay locked in the child for ever (the
// liveness watcher's, seen in a child's first close).  The clone also waits
// for any vsocket thread still being created to run (background_thread.h).  A clone with
// CLONE_VM (a thread; vfork) shares the parent's tables and needs nothing.
//
// Not seen: a clone system call made without libc (inline assembly, a
// static binary, Go); _Fork(), which may be called from a signal handler,
// where a move cannot run (docs/COMPATIBILITY.md).
//
// Threads: the calling thread moves; a connection another thread is using
// at that moment moves under its transport's own locks, as for exec.
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/after_fork.h"
#include "base/user_copy_guard.h"
#include "preload/descriptors.h"
#include "preload/interpose_io_uring.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "vsocket/background_thread.h"
#include "vsocket/fallback_reason.h"

namespace vsocket::preload {
namespace {

// Before a clone without CLONE_VM: every connection of this process moves
// to kernel TCP.  Numbers that are not connections are left alone.
void MoveConnectionsBeforeClone(uint64_t flags) {
  if (flags & CLONE_VM) return;
  MoveConnectionsToKernelTcp([](int) { return true; }, FallbackReason::kClone);
}

// clone3's flags, or CLONE_VM (do nothing) when they cannot be read: the
// kernel then answers EFAULT itself.
uint64_t Clone3Flags(const void* args, long size) {
  uint64_t flags = CLONE_VM;
  if (args == nullptr || size < static_cast<long>(sizeof(uint64_t))) return flags;
  InstallUserCopyGuard();
  uint64_t read = 0;
  if (GuardedUserCopy([&] { read = static_cast<const struct clone_args*>(args)->flags; }))
    flags = read;
  return flags;
}

// Runs `clone_call` (which returns 0 in the child) between vsocket's fork
// handlers, as fork() would.  errno is the call's.
// A thread being created when fork() runs is not the child's business, but
// its count would stay up in the child for ever.
const bool g_reset_starting_in_child = [] {
  sys::AtFork(nullptr, nullptr,
              [] { g_background_threads_starting.store(0, std::memory_order_relaxed); });
  return true;
}();

template <typename Call>
long CloneWithForkHandlers(Call clone_call) {
  WaitForBackgroundThreadsToStart(1000);
  sys::RunPrepareHandlers();
  long ret = clone_call();
  int saved = errno;
  if (ret == 0) {
    sys::RunChildHandlers();
    sys::RunForkedChildWork();
  } else {
    sys::RunParentHandlers();
  }
  errno = saved;
  return ret;
}

// glibc's clone() runs the child on `fn`: the child's handlers go first.
// When `fn` returns, glibc ends only the calling thread (SYS_exit), which
// ends the process only if it has no other thread; vsocket's work in the
// child may have started one (the liveness watcher), so the whole child
// exits with fn's value instead, as a single-threaded one would.
struct CloneStart {
  int (*fn)(void*);
  void* arg;
};
int StartClonedChild(void* start) {
  CloneStart s = *static_cast<CloneStart*>(start);  // the child's own copy
  sys::RunChildHandlers();
  sys::RunForkedChildWork();
  ::_exit(s.fn(s.arg));
}

}  // namespace
}  // namespace vsocket::preload

// glibc's syscall(): only the clone and io_uring_setup numbers are looked
// at (the latter: interpose_io_uring.h); every other
// call goes on unchanged (six arguments read and passed, as the kernel
// takes at most six).
VSP_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  uint64_t flags = CLONE_VM;
  if (__builtin_expect(number == SYS_io_uring_setup, 0)) {
    vsocket::preload::OnIoUringStarted();  // interpose_io_uring.h
  } else if (__builtin_expect(number == SYS_clone, 0)) {
    flags = static_cast<unsigned long>(a1);
  } else if (__builtin_expect(number == SYS_clone3, 0)) {
    flags = vsocket::preload::Clone3Flags(reinterpret_cast<const void*>(a1), a2);
  }
  if (__builtin_expect(!(flags & CLONE_VM), 0)) {
    vsocket::preload::MoveConnectionsBeforeClone(flags);
    return vsocket::preload::CloneWithForkHandlers([&] {
      return vsocket::preload::real::syscall6(number, a1, a2, a3, a4, a5, a6);
    });
  }
  return vsocket::preload::real::syscall6(number, a1, a2, a3, a4, a5, a6);
}

VSP_EXPORT int clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  void* parent_tid = va_arg(ap, void*);
  void* tls = va_arg(ap, void*);
  void* child_tid = va_arg(ap, void*);
  va_end(ap);
  if (flags & CLONE_VM)
    return vsocket::preload::real::clone(fn, stack, flags, arg, parent_tid, tls, child_tid);
  vsocket::preload::MoveConnectionsBeforeClone(static_cast<unsigned int>(flags));
  vsocket::preload::CloneStart start = {fn, arg};
  return static_cast<int>(vsocket::preload::CloneWithForkHandlers([&]() -> long {
    return vsocket::preload::real::clone(&vsocket::preload::StartClonedChild, stack, flags,
                                         &start, parent_tid, tls, child_tid);
  }));
}
