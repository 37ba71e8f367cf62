// Without an RDMA device (the development host, CI), VSOCKET_TRANSPORT=rdma
// must fall back to kernel TCP at once with the reason no_rdma_device, and
// the data must flow.  Exits 77 (ctest SKIP) where a device exists (the
// guest), since then the connection would rightly use RDMA.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "child_check.h"
#include "clock.h"
#include "rdma_device.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test::NowUs;

}  // namespace

int main() {
  if (vsocket_test::HaveRdmaDevice()) {
    printf("SKIP: an RDMA device exists here\n");
    return 77;
  }
  setenv("VSOCKET_TRANSPORT", "rdma", 1);
  int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
  CHECK(vsocket_listen(lfd, 4) == 0, "listen");
  socklen_t len = sizeof(a);
  CHECK(vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0, "name");
  pid_t child = fork();
  if (child == 0) {
    int fd = vsocket_accept(lfd, nullptr, nullptr);
    CHECK(fd >= 0, "accept");
    CHECK(!strcmp(vsocket_transport_name(fd), "tcp"), "server transport %s",
          vsocket_transport_name(fd));
    char buf[5];
    CHECK(vsocket_recv(fd, buf, 5, MSG_WAITALL) == 5 && !memcmp(buf, "hello", 5), "data");
    CHECK(vsocket_send(fd, "ok", 2, 0) == 2, "reply");
    vsocket_close(fd);
    _exit(0);
  }
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  int64_t t0 = NowUs();
  CHECK(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "connect");
  int64_t us = NowUs() - t0;
  printf("connect: %s (%s) in %lld us\n", vsocket_transport_name(fd),
         vsocket_fallback_reason(fd), static_cast<long long>(us));
  CHECK(!strcmp(vsocket_transport_name(fd), "tcp"), "transport");
  CHECK(!strcmp(vsocket_fallback_reason(fd), "no_rdma_device"), "reason %s",
        vsocket_fallback_reason(fd));
  CHECK(us < 1000000, "the fallback took %lld us", static_cast<long long>(us));
  CHECK(vsocket_send(fd, "hello", 5, 0) == 5, "send");
  char buf[2];
  CHECK(vsocket_recv(fd, buf, 2, MSG_WAITALL) == 2 && !memcmp(buf, "ok", 2), "reply");
  vsocket_close(fd);
  int st = 0;
  waitpid(child, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server failed");
  char json[1024];
  vsocket_stats_json(json, sizeof(json));
  CHECK(strstr(json, "\"no_rdma_device\":1") != nullptr, "stats: %s", json);
  printf("PASS: %s\n", json);
  return 0;
}
