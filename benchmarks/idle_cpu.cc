// vsocket-idle-cpu: how much CPU a blocked receiver burns while its
// connection is idle.  For each transport, a forked server accepts, stays
// silent for --idle-ms, then sends one byte; the client blocks in
// vsocket_recv the whole time.  Reported: the client's CPU time (getrusage,
// user+sys) over the wait, and that as a share of one core.  Expected on the
// shared-memory path: about VSOCKET_SPIN_US of CPU, then nothing.
//
// Usage: vsocket-idle-cpu [--idle-ms N] [--transports tcp,shm]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>

#include "vsocket/vsocket.h"

namespace {

double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

double WallSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Runs one measurement in a child process (the transport is chosen by the
// environment at the library's first use).  Prints one table row.
int MeasureIn(const std::string& transport, int idle_ms) {
  setenv("VSOCKET_TRANSPORT", transport.c_str(), 1);
  int listener = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (vsocket_bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      vsocket_listen(listener, 4) != 0 ||
      vsocket_getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    perror("listen");
    return 1;
  }
  pid_t server = fork();
  if (server == 0) {
    int fd = vsocket_accept(listener, nullptr, nullptr);
    usleep(idle_ms * 1000);
    char byte = 1;
    vsocket_send(fd, &byte, 1, 0);
    vsocket_recv(fd, &byte, 1, 0);  // wait for the client's close
    _exit(0);
  }
  vsocket_close(listener);
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  if (vsocket_connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    perror("connect");
    return 1;
  }
  const char* path = vsocket_transport_name(fd);
  double cpu0 = CpuSeconds(), wall0 = WallSeconds();
  char byte;
  ssize_t n = vsocket_recv(fd, &byte, 1, 0);
  double cpu = CpuSeconds() - cpu0, wall = WallSeconds() - wall0;
  vsocket_close(fd);
  waitpid(server, nullptr, 0);
  if (n != 1) {
    fprintf(stderr, "recv failed\n");
    return 1;
  }
  printf("%-9s %-6s %10.1f %10.2f %9.2f%%\n", transport.c_str(), path ? path : "?",
         wall * 1e3, cpu * 1e3, 100.0 * cpu / wall);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int idle_ms = 2000;
  std::string transports = "tcp,shm";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc) {
      idle_ms = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--transports") && i + 1 < argc) {
      transports = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--idle-ms N] [--transports tcp,shm]\n", argv[0]);
      return 2;
    }
  }
  printf("Idle connection: client blocked in recv for %d ms\n", idle_ms);
  printf("%-9s %-6s %10s %10s %10s\n", "requested", "path", "wall ms", "CPU ms", "CPU/core");
  fflush(stdout);
  std::stringstream list(transports);
  int status = 0;
  for (std::string t; std::getline(list, t, ',');) {
    pid_t child = fork();
    if (child == 0) {
      int rc = MeasureIn(t, idle_ms);
      fflush(stdout);
      _exit(rc);
    }
    int st = 0;
    waitpid(child, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
  }
  return status;
}
