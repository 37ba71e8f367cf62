// io_uring rings for the toe engine: one per thread, made on first use.
//
// Why per thread: every operation the engine submits completes inside the
// call that submitted it (the engine never leaves work in flight across a
// return), so a ring is only ever touched by the thread that made it.  That
// is exactly what IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN
// want: completions run when this thread waits for them, never as task
// work that would interrupt the application's own system calls.  No lock,
// no cross-thread hand-off, and a thread that never touches a toe
// connection never makes a ring.
//
// What the kernel can do is probed once per process (ProbeUring): a fresh
// Debian 12 kernel (6.1) has DEFER_TASKRUN and SEND_ZC, older ones lack
// them, and io_uring may be off altogether (the kernel.io_uring_disabled
// sysctl, a seccomp profile, RLIMIT_MEMLOCK on kernels that charge rings
// to it).
#ifndef VSOCKET_TOE_BACKEND_URING_RING_H_
#define VSOCKET_TOE_BACKEND_URING_RING_H_

#include <liburing.h>

#include <cstdint>

namespace vsocket::toe {

struct UringSupport {
  bool available = false;
  int error = 0;              // errno of the failed setup when !available
  unsigned setup_flags = 0;   // what each thread's ring is made with
  bool send_zc = false;       // IORING_OP_SEND_ZC is supported
  bool defer_taskrun = false;
  // A receive with MSG_DONTWAIT on an empty socket completes at once with
  // -EAGAIN (instead of waiting for data), checked on a socketpair.  The
  // engine reads ahead only when it does.
  bool nowait_recv = false;
};

// Probes once (thread-safe); later calls return the same answer.
const UringSupport& ProbeUring();

// The calling thread's ring, made on first use with ProbeUring()'s flags;
// nullptr when io_uring is unavailable or this thread's ring could not be
// made (each call then uses plain system calls).  In a forked child the
// parent's ring is left alone and a new one is made.
// REQUIRES: used only by the calling thread, and every submission is
//           reaped before the caller returns (SubmitAndReap).
struct io_uring* ThisThreadRing();

// Submits what is queued on `ring` and waits until `count` completions
// arrived, storing each one's res by user_data (0..count-1) in `res` and,
// for a SEND_ZC, waiting for its notification too (user_data with the
// kZeroCopyBit set: the notification is awaited, not reported).
// Returns 0, or -errno when the submission itself failed (then no
// operation ran).
inline constexpr uint64_t kZeroCopyBit = 1ull << 63;
int SubmitAndReap(struct io_uring* ring, int count, int32_t* res);

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_URING_RING_H_
