#include "stream_endpoints.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdlib>

#include "child_check.h"
#include "clock.h"

namespace vsocket_test {

const char* RdmaGuestIp() {
  const char* ip = getenv("VSOCKET_RDMA_SELF_IP");
  return ip ? ip : "";
}

const char* SelfIp() {
  const char* ip = RdmaGuestIp();
  return *ip ? ip : "127.0.0.1";
}

sockaddr_in Ipv4(const char* ip, int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1, "bad ip %s", ip);
  return a;
}

int ListenOn(const SocketApi& api, sockaddr_in addr, int* port,
             ListenOptions options) {
  int fd = api.socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  if (options.reuse_addr) {
    int one = 1;
    CHECK(api.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0,
          "SO_REUSEADDR");
  }
  CHECK(api.bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0, "bind");
  CHECK(api.listen(fd, options.backlog) == 0, "listen");
  socklen_t len = sizeof(addr);
  CHECK(api.getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
        "getsockname");
  *port = ntohs(addr.sin_port);
  return fd;
}

int ConnectTo(const SocketApi& api, sockaddr_in addr, int64_t* elapsed_us) {
  int fd = api.socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  int64_t start = NowUs();
  int rc = api.connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (elapsed_us) *elapsed_us = NowUs() - start;
  if (rc != 0) {
    int saved = errno;  // the FAIL line shows connect()'s errno
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
    errno = saved;
    Fail(__FILE__, __LINE__, "connect to %s:%d", ip, ntohs(addr.sin_port));
  }
  return fd;
}

}  // namespace vsocket_test
