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

// The pace of a poller's spin over its looks (epoll_spin.cc,
// poll_user_space.cc): a pause between looks, the clock read every 8th,
// a yield at most every kPollerYieldEveryNs once past kPureSpinNs.
// One thread.
class PollerPacer {
 public:
  PollerPacer(int64_t start_ns, int64_t budget_ns)
      : start_(start_ns), budget_(budget_ns), now_(start_ns), last_yield_(start_ns) {}
  // Waits before the next look; false once the budget is spent.
  bool Next() {
    if ((++round_ & 7) == 0) {
      now_ = MonotonicNs();
      if (now_ - start_ >= budget_) return false;
      if (now_ - start_ >= kPureSpinNs && now_ - last_yield_ >= kPollerYieldEveryNs) {
        YieldCpu();
        last_yield_ = now_;
        return true;
      }
    }
    CpuRelax();
    return true;
  }
  // The clock as last read (at most 8 looks old).
  int64_t now() const { return now_; }

 private:
  int64_t start_, budget_, now_, last_yield_;
  uint32_t round_ = 0;
};

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
