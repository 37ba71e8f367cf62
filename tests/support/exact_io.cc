#include "exact_io.h"

#include "child_check.h"

namespace vsocket_test {

void SendAll(const SocketApi& api, int fd, const void* buf, size_t len, int flags) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = api.send(fd, p, len, flags);
    CHECK(n > 0, "send: %zd with %zu bytes still to send", n, len);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void RecvAll(const SocketApi& api, int fd, void* buf, size_t len, int flags) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = api.recv(fd, p, len, flags);
    CHECK(n > 0, "recv: %zd with %zu bytes still expected", n, len);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace vsocket_test
