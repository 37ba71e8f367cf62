#include "scenario_harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "vsocket/vsocket.h"

namespace vsocket_rdma_test {

const char* g_scenario = "?";
const char* g_role = "main";

namespace {
unsigned g_pair_alarm_s = 0;  // RunScenarios()'s pair_alarm_s
}  // namespace

void Fail(const char* file, int line, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL [%s/%s] %s:%d: %s (errno %d %s)\n", g_scenario,
          g_role, file, line, msg, errno, strerror(errno));
  _exit(1);
}

int64_t NowUs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

const char* SelfIp() {
  const char* ip = getenv("VSOCKET_RDMA_SELF_IP");
  return ip ? ip : "127.0.0.1";
}

sockaddr_in Addr(const char* ip, int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1, "bad ip %s", ip);
  return a;
}

void Ctl::Send(int side, int64_t value) {
  CHECK(write(fds[side], &value, sizeof(value)) == sizeof(value), "ctl write");
}

int64_t Ctl::Recv(int side) {
  int64_t value = -1;
  CHECK(read(fds[side], &value, sizeof(value)) == sizeof(value), "ctl read");
  return value;
}

int Listen(int* port) {
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  int one = 1;
  vsocket_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Addr(SelfIp(), 0);
  CHECK(vsocket_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
  CHECK(vsocket_listen(fd, 16) == 0, "listen");
  socklen_t len = sizeof(a);
  CHECK(vsocket_getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0,
        "getsockname");
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(int port, int64_t* elapsed_us) {
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  sockaddr_in a = Addr(SelfIp(), port);
  int64_t start = NowUs();
  CHECK(vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0,
        "connect to %s:%d", SelfIp(), port);
  if (elapsed_us) *elapsed_us = NowUs() - start;
  return fd;
}

int RunPair(const std::function<void(Ctl&)>& server,
            const std::function<void(Ctl&, pid_t server_pid)>& client) {
  Ctl ctl;
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl.fds) == 0, "socketpair");
  pid_t s = fork();
  if (s == 0) {
    g_role = "server";
    close(ctl.fds[1]);
    if (g_pair_alarm_s > 0) alarm(g_pair_alarm_s);  // never hang the suite
    server(ctl);
    fflush(stdout);
    _exit(0);
  }
  pid_t c = fork();
  if (c == 0) {
    g_role = "client";
    close(ctl.fds[0]);
    if (g_pair_alarm_s > 0) alarm(g_pair_alarm_s);
    client(ctl, s);
    fflush(stdout);
    _exit(0);
  }
  close(ctl.fds[0]);
  close(ctl.fds[1]);
  int ss = 0, cs = 0;
  waitpid(c, &cs, 0);
  waitpid(s, &ss, 0);
  bool client_ok = WIFEXITED(cs) && WEXITSTATUS(cs) == 0;
  // The kill scenarios end their server with SIGKILL on purpose.
  bool server_ok = (WIFEXITED(ss) && WEXITSTATUS(ss) == 0) ||
                   (WIFSIGNALED(ss) && WTERMSIG(ss) == SIGKILL);
  if (!client_ok) fprintf(stderr, "  client status 0x%x\n", cs);
  if (!server_ok) fprintf(stderr, "  server status 0x%x\n", ss);
  return client_ok && server_ok ? 0 : 1;
}

bool HaveDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') any = true;
  }
  closedir(d);
  return any;
}

int RunScenarios(int argc, char** argv, std::span<const Scenario> all,
                 unsigned pair_alarm_s) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!HaveDevice()) {
    printf("SKIP: no RDMA device (run in the guest: tests/rdma/run-suite.sh)\n");
    return kSkipExitCode;
  }
  g_pair_alarm_s = pair_alarm_s;
  int passed = 0, failed = 0;
  for (const Scenario& s : all) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted |= !strcmp(argv[i], s.name);
    if (!wanted) continue;
    g_scenario = s.name;
    int64_t start = NowUs();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(s.run());
    int st = 0;
    waitpid(pid, &st, 0);
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("%s %s (%.2f s)\n", ok ? "PASS" : "FAIL", s.name,
           (NowUs() - start) / 1e6);
    (ok ? passed : failed)++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace vsocket_rdma_test
