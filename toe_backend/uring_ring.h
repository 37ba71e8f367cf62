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
//
// SQPOLL (VSOCKET_TOE_SQPOLL, off by default): the rings are still one per
// thread, but a kernel thread ("iou-sqp-<pid>") takes their submissions,
// and there is one such thread per process image: the image's first ring
// starts it, every later ring attaches to it (IORING_SETUP_ATTACH_WQ).
// The calling thread waits on its completion queue until its operations
// are done (spinning first for VSOCKET_TOE_SQPOLL_SPIN_US, then asleep in
// io_uring_enter), so the contract is unchanged: nothing is in flight once
// the call that submitted it returns.  The kernel allows no DEFER_TASKRUN or
// COOP_TASKRUN with SQPOLL (EINVAL), nor needs them: the SQ thread issues
// the operations, so their task work is its own.  Refused (EPERM before
// Linux 5.11 without privilege, EAGAIN under a process limit, ENOMEM,
// EINVAL), it is logged once and the rings are made as without it.
#ifndef VSOCKET_TOE_BACKEND_URING_RING_H_
#define VSOCKET_TOE_BACKEND_URING_RING_H_

#include <liburing.h>

#include <atomic>
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
  // VSOCKET_TOE_SQPOLL asked for and granted: setup_flags has
  // IORING_SETUP_SQPOLL, and the rings share one SQ thread per image.
  bool sqpoll = false;
  uint32_t sqpoll_idle_ms = 0;  // the SQ thread sleeps after this long idle
  uint32_t sqpoll_spin_ns = 0;  // a caller spins this long for completions
  // Asked for but refused: the errno (EOPNOTSUPP: a kernel before 5.11,
  // whose SQPOLL works on registered files only).  0 otherwise.
  int sqpoll_error = 0;
};

// What SQPOLL rings did, process-wide, for the toe_engine stats.  Relaxed
// atomics: written by the threads that submit, read by any thread.
struct SqpollCounters {
  // Submissions that found the SQ thread asleep (IORING_SQ_NEED_WAKEUP):
  // each cost an io_uring_enter to wake it.  Read just before submitting,
  // so the count may be off by one where the thread fell asleep meanwhile.
  std::atomic<uint64_t> wakeups{0};
  // Completions still missing after the spin: the thread slept in
  // io_uring_enter for them.
  std::atomic<uint64_t> waits{0};
  // Threads whose SQPOLL ring could not be made: a plain ring instead.
  std::atomic<uint64_t> plain_rings{0};
};
const SqpollCounters& GetSqpollCounters();

// Probes once (thread-safe); later calls return the same answer.
const UringSupport& ProbeUring();

// The calling thread's ring, made on first use with ProbeUring()'s flags;
// nullptr when io_uring is unavailable or this thread's ring could not be
// made (each call then uses plain system calls).  In a forked child the
// parent's ring is left alone and a new one is made.
// REQUIRES: used only by the calling thread, and every submission is
//           reaped before the caller returns (SubmitAndReap).
struct io_uring* ThisThreadRing();

// The calling thread's ring if it is an SQPOLL one (ThisThreadRing's
// rules), else nullptr: SQPOLL off or refused, or this thread's ring fell
// back to a plain one.  With SQPOLL off, no ring is made and nothing is
// probed.
struct io_uring* ThisThreadSqpollRing();

// Submits what is queued on `ring` and waits until `count` completions
// arrived, storing each one's res by user_data (0..count-1) in `res` and,
// for a SEND_ZC, waiting for its notification too (user_data with the
// kZeroCopyBit set: the notification is awaited, not reported).
// With an SQPOLL ring the SQ thread runs the operations while the caller
// waits on the completion queue (an io_uring_enter only to wake the SQ
// thread, or to sleep for a completion the spin did not see).
// Returns 0, or -errno when the submission itself failed (then no
// operation ran).
inline constexpr uint64_t kZeroCopyBit = 1ull << 63;
int SubmitAndReap(struct io_uring* ring, int count, int32_t* res);

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_URING_RING_H_
