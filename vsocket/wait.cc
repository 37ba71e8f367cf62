#include "vsocket/wait.h"

#include <errno.h>
#include <sched.h>
#include <time.h>
#include "base/real_libc.h"

namespace vsocket {

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void YieldCpu() { sched_yield(); }

int PollUntil(struct pollfd* fds, int nfds, int64_t deadline_ns) {
  int timeout_ms = -1;
  if (deadline_ns >= 0) {
    int64_t left = deadline_ns - MonotonicNs();
    if (left <= 0) return sys::poll(fds, nfds, 0);
    timeout_ms = static_cast<int>((left + 999999) / 1000000);
  }
  return sys::poll(fds, nfds, timeout_ms);
}

}  // namespace vsocket
