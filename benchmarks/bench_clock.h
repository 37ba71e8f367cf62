// Time and CPU-usage readings used by every benchmark mode.
#ifndef VSOCKET_BENCHMARKS_BENCH_CLOCK_H_
#define VSOCKET_BENCHMARKS_BENCH_CLOCK_H_

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

namespace vbench {

// CLOCK_MONOTONIC in nanoseconds.
inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CPU time consumed by this process (all its threads), in microseconds.
struct CpuTime {
  int64_t user_us = 0;
  int64_t sys_us = 0;

  int64_t total_us() const { return user_us + sys_us; }
  CpuTime operator-(const CpuTime& earlier) const {
    return {user_us - earlier.user_us, sys_us - earlier.sys_us};
  }
};

// getrusage(RUSAGE_SELF) user and system time.
inline CpuTime process_cpu_time() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {int64_t{ru.ru_utime.tv_sec} * 1'000'000 + ru.ru_utime.tv_usec,
          int64_t{ru.ru_stime.tv_sec} * 1'000'000 + ru.ru_stime.tv_usec};
}

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_CLOCK_H_
