// The loopback address the fork-based integration tests listen on and
// connect to.  Header-only (no library to link).  The clock: clock.h.
#ifndef VSOCKET_TESTS_SUPPORT_LOOPBACK_H_
#define VSOCKET_TESTS_SUPPORT_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>

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

}  // namespace vsocket_test_support

#endif  // VSOCKET_TESTS_SUPPORT_LOOPBACK_H_
