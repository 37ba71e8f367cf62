// Small helpers the fork-based integration tests share: a loopback address
// and a millisecond clock.  Header-only (no library to link).
#ifndef VSOCKET_TESTS_SUPPORT_LOOPBACK_H_
#define VSOCKET_TESTS_SUPPORT_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>

#include <cstdint>

namespace vsocket_test_support {

// 127.0.0.1:port.
inline sockaddr_in Loopback(int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// CLOCK_MONOTONIC in milliseconds.
inline int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace vsocket_test_support

#endif  // VSOCKET_TESTS_SUPPORT_LOOPBACK_H_
