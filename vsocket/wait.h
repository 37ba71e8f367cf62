// Time and waiting helpers shared by the transports: monotonic deadlines,
// a CPU-friendly spin pause, and poll() on up to a few descriptors with
// EINTR reported to the caller (POSIX: a signal without SA_RESTART makes a
// blocked socket call fail with EINTR).
#ifndef VSOCKET_VSOCKET_WAIT_H_
#define VSOCKET_VSOCKET_WAIT_H_

#include <poll.h>

#include <cstdint>

namespace vsocket {

int64_t MonotonicNs();

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Busy-polls `ready()` for at most `budget_ns`: pure spinning for the first
// few microseconds, then sched_yield() between looks, so that a peer waiting
// for this core (more runnable threads than cores) can run.  Returns true as
// soon as ready() does, false when the budget is spent or `give_up()` says so.
template <typename Ready, typename GiveUp>
bool SpinUntil(Ready ready, GiveUp give_up, uint32_t budget_ns);

void YieldCpu();

// Absolute deadline for a relative timeout; -1 stays "forever".
inline int64_t DeadlineAfter(int64_t timeout_ns) {
  return timeout_ns < 0 ? -1 : MonotonicNs() + timeout_ns;
}

// poll() until `deadline_ns` (-1 = forever).  Returns >0 when a descriptor is
// ready, 0 on timeout, -1 with errno (EINTR included) on error.
int PollUntil(struct pollfd* fds, int nfds, int64_t deadline_ns);

inline constexpr int64_t kPureSpinNs = 5000;
// A poller that spins past kPureSpinNs looking at many connections (the
// interposed waits) yields at most this often: each yield is a system
// call, which a machine with a core per busy thread only pays for.
inline constexpr int64_t kPollerYieldEveryNs = 10000;

template <typename Ready, typename GiveUp>
bool SpinUntil(Ready ready, GiveUp give_up, uint32_t budget_ns) {
  if (budget_ns == 0) return ready();
  int64_t start = MonotonicNs();
  int64_t pure_end = start + (budget_ns < kPureSpinNs ? budget_ns : kPureSpinNs);
  int64_t end = start + budget_ns;
  for (uint32_t i = 1;; ++i) {
    if (ready()) return true;
    if ((i & 31) == 0) {
      int64_t now = MonotonicNs();
      if (now >= end || give_up()) return false;
      if (now >= pure_end) {
        YieldCpu();
        continue;
      }
    }
    CpuRelax();
  }
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_WAIT_H_
