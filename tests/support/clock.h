// CLOCK_MONOTONIC readings for tests: deadlines, elapsed times.  Comparable
// across processes on one host.  Header-only.
#ifndef VSOCKET_TESTS_SUPPORT_CLOCK_H_
#define VSOCKET_TESTS_SUPPORT_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace vsocket_test {

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t NowUs() { return NowNs() / 1000; }
inline int64_t NowMs() { return NowNs() / 1'000'000; }

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_CLOCK_H_
