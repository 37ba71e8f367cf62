// Copies that touch the caller's buffers answer a bad pointer with EFAULT,
// as the kernel's copy_from_user/copy_to_user do, instead of killing the
// program with SIGSEGV.  A send or receive on a shared-memory or RDMA
// connection copies between the caller's iovecs and a ring in user space;
// kernel TCP would have checked every pointer.
//
// How: GuardedUserCopy runs the copy with a recovery point (sigsetjmp
// without the signal mask: no system call) published in a thread-local
// slot.  The guard's handler for SIGSEGV and SIGBUS, and the interposer's
// trampoline (preload/interpose_signal.cc) when the program installed its
// own handler, call RecoverUserCopyFault first: a fault raised by the
// hardware (not kill()) while the slot is set jumps back to the recovery
// point, and GuardedUserCopy returns false.  Any other fault goes on to the
// handler that was there before (the default action if none), so a bug
// still crashes where it crashed.  A SIGBUS of vsocket's own shared files
// is offered to base/shared_file_fault_guard.h first.
//
// Who installs: the owner of a copy, before its first one (the ring halves
// in fifo_bridge/spsc_ring.cc), through libc's sigaction.  Under the
// interposer a handler the program installs later keeps the guard in
// front; with the explicit API it replaces the guard (a bad pointer is a
// SIGSEGV again, as without it).
#ifndef VSOCKET_BASE_USER_COPY_GUARD_H_
#define VSOCKET_BASE_USER_COPY_GUARD_H_

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

namespace vsocket {

namespace user_copy_internal {
struct Frame {
  sigjmp_buf env;
};
// The innermost guarded copy of this thread, or null.
extern __attribute__((tls_model("initial-exec"))) thread_local Frame* t_frame;

// Runs `run(arg)` with `frame` published; false if it faulted.
bool RunGuarded(void (*run)(void*), void* arg);
}  // namespace user_copy_internal

// Installs the SIGSEGV and SIGBUS handlers, once per process; later calls
// cost one atomic load.  Thread-safe.
void InstallUserCopyGuard();

// Runs `copy()`.  True when it finished; false when it touched memory the
// process may not access (the copy stopped there: whatever it wrote before
// stays written).
// REQUIRES: `copy` takes no lock, allocates nothing and leaves no state
// that a jump out of it midway would corrupt (it copies bytes between
// buffers and updates locals of its caller, which are unspecified after a
// fault); InstallUserCopyGuard() ran, or a fault is fatal as without it.
template <typename Fn>
bool GuardedUserCopy(Fn&& copy) {
  return user_copy_internal::RunGuarded(
      [](void* f) { (*static_cast<Fn*>(f))(); }, &copy);
}

// Whether CopyUserBytes copies small blocks with a fault landing (x86-64;
// not under ASan/TSan, which must see the copy as a memcpy).
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define VSOCKET_COPY_USER_BY_LANDING 1
extern "C" size_t vsocket_copy_user_bytes_left(void* dst, const void* src, size_t n);
#else
#define VSOCKET_COPY_USER_BY_LANDING 0
#endif
// The largest copy that takes the landing; larger ones take GuardedUserCopy
// around memcpy, whose recovery point costs little beside their length.
inline constexpr size_t kLandingCopyMax = VSOCKET_COPY_USER_BY_LANDING ? 256 : 0;

// Copies `n` bytes between `src` and `dst`, either of which may be the
// caller's memory.  Returns the bytes copied: `n`, or fewer when a bad
// pointer stopped the copy (what it wrote before stays written).
//  - Up to kLandingCopyMax bytes (x86-64): moves whose fault the guard's
//    handler resumes at a landing, as the kernel's copy_from_user does with
//    its exception table: no recovery point is set up, so a small copy
//    costs what memcpy costs.  A fault returns the exact count before the
//    first bad byte.  (Dropping a sigsetjmp per copy made a 64-byte round
//    trip over shared memory 7% faster; one `rep movsb` for every size was
//    slower than the sigsetjmp.)
//  - Larger copies: GuardedUserCopy around memcpy; a fault (or a null
//    pointer) returns 0.
// REQUIRES: InstallUserCopyGuard() ran, or a fault is fatal as without it.
size_t CopyUserBytesGuarded(void* dst, const void* src, size_t n);
inline size_t CopyUserBytes(void* dst, const void* src, size_t n) {
#if VSOCKET_COPY_USER_BY_LANDING
  if (n <= kLandingCopyMax) [[likely]]
    return n - vsocket_copy_user_bytes_left(dst, src, n);
#endif
  // Out of line: its recovery point would otherwise make the caller keep
  // the arguments in memory on the small copies' path too.
  return CopyUserBytesGuarded(dst, src, n);
}

// The kernel's get_user/copy_to_user for the few values vsocket answers
// itself (an ioctl's int, a getsockopt's value and length): false, having
// set errno to EFAULT, when the caller's pointer is bad.  Install the guard.
inline bool CopyFromUser(void* to, const void* from, size_t n) {
  InstallUserCopyGuard();
  if (CopyUserBytes(to, from, n) == n) return true;
  errno = EFAULT;
  return false;
}
inline bool CopyToUser(void* to, const void* from, size_t n) {
  return CopyFromUser(to, from, n);
}

// Async-signal-safe; for signal handlers that stand in front of the guard's
// (the interposer's trampoline); `context` is the handler's third argument.
// True when `info` was a fault of CopyUserBytes: `context` now resumes at
// its landing, and the handler must return at once.  Does not return when
// it was a fault inside a guarded copy of this thread (the copy's
// GuardedUserCopy returns false).  False otherwise, having changed nothing.
bool RecoverUserCopyFault(int sig, const siginfo_t* info, void* context);

}  // namespace vsocket

#endif  // VSOCKET_BASE_USER_COPY_GUARD_H_
