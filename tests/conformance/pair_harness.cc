#include "pair_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "vsocket/vsocket.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern char** environ;

namespace conformance {

const char* g_role = "main";

namespace {

const char* g_case = "?";

void WriteFull(int fd, const void* buf, size_t len) {
  ssize_t n;
  do n = write(fd, buf, len); while (n < 0 && errno == EINTR);
  CHECK(n == static_cast<ssize_t>(len), "ctl write");
}

// $VSOCKET_RDMA_SELF_IP (the guest's rxe address), else loopback.
sockaddr_in Address(int port) {
  const char* ip = getenv("VSOCKET_RDMA_SELF_IP");
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(inet_pton(AF_INET, ip ? ip : "127.0.0.1", &a.sin_addr) == 1, "bad ip");
  return a;
}

// The test, not the shell, decides the configuration: drops every VSOCKET_*
// variable but the guest's address and the log level, then sets the policy.
void Configure(const char* policy) {
  std::vector<std::string> drop;
  for (char** e = environ; *e; ++e) {
    std::string var(*e);
    std::string name = var.substr(0, var.find('='));
    if (name.rfind("VSOCKET_", 0) == 0 && name != "VSOCKET_RDMA_SELF_IP" &&
        name != "VSOCKET_LOG") {
      drop.push_back(name);
    }
  }
  for (const std::string& name : drop) unsetenv(name.c_str());
  if (policy) setenv("VSOCKET_TRANSPORT", policy, 1);
}

int Accept(const SocketApi& api, Ctl& ctl) {
  int lfd = api.socket(AF_INET, SOCK_STREAM, 0);
  CHECK(lfd >= 0, "socket");
  int one = 1;
  CHECK(api.setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0,
        "SO_REUSEADDR");
  sockaddr_in a = Address(0);
  CHECK(api.bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
  CHECK(api.listen(lfd, 4) == 0, "listen");
  socklen_t len = sizeof(a);
  CHECK(api.getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) == 0,
        "getsockname");
  ctl.Send(ntohs(a.sin_port));
  int fd = api.accept(lfd, nullptr, nullptr);
  CHECK(fd >= 0, "accept");
  CHECK(api.close(lfd) == 0, "close listener");
  return fd;
}

int Connect(const SocketApi& api, Ctl& ctl) {
  int port = static_cast<int>(ctl.Recv());
  int fd = api.socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  sockaddr_in a = Address(port);
  CHECK(api.connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0,
        "connect to port %d", port);
  return fd;
}

[[noreturn]] void RunEnd(const Transport& t, bool server, int ctl_fd,
                         const EndFn& fn, unsigned watchdog_s) {
  g_role = server ? "server" : "client";
  alarm(watchdog_s);           // a hang ends in SIGALRM
  signal(SIGPIPE, SIG_IGN);    // cases that count SIGPIPE install a handler
  Configure(t.policy);
  Ctl ctl{ctl_fd};
  int fd = server ? Accept(*t.api, ctl) : Connect(*t.api, ctl);
  if (t.policy) {
    const char* name = t.api->transport_name(fd);
    const char* why = vsocket_fallback_reason(fd);
    CHECK(name && !strcmp(name, t.policy), "transport %s, want %s (reason %s)",
          name ? name : "(null)", t.policy, why ? why : "(null)");
  }
  End end{*t.api, fd, ctl};
  fn(end);
  end.Barrier();
  if (end.fd >= 0) end.Close();
  fflush(stdout);
#if defined(__SANITIZE_ADDRESS__)
  // _exit() skips LeakSanitizer's exit-time check: run it here.
  if (__lsan_do_recoverable_leak_check()) Fail(__FILE__, __LINE__, "leaks");
#endif
  _exit(0);
}

std::string Describe(const char* role, int status, bool killed) {
  if (killed) return std::string(role) + ": still running at the deadline (SIGKILLed); ";
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return "";
    return std::string(role) + ": exit " + std::to_string(WEXITSTATUS(status)) + "; ";
  }
  std::string s = std::string(role) + ": killed by signal " +
                  std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status));
  if (WTERMSIG(status) == SIGALRM) s += ", the end's watchdog";
  return s + "); ";
}

}  // namespace

void Fail(const char* file, int line, const char* fmt, ...) {
  int saved = errno;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL [%s/%s] %s:%d: %s (errno %d %s)\n", g_case, g_role,
          file, line, msg, saved, strerror(saved));
  fflush(stderr);
  _exit(1);
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

void Ctl::Send(int64_t value) { WriteFull(fd, &value, sizeof(value)); }

int64_t Ctl::Recv() {
  int64_t value = 0;
  ssize_t n;
  do n = read(fd, &value, sizeof(value)); while (n < 0 && errno == EINTR);
  CHECK(n == sizeof(value), "ctl read: the other end went away");
  return value;
}

void End::SendAll(const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = api.send(fd, p, len, MSG_NOSIGNAL);
    CHECK(n > 0, "send: %zd", n);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void End::RecvAll(void* buf, size_t len) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = api.recv(fd, p, len, 0);
    CHECK(n > 0, "recv: %zd with %zu bytes still expected", n, len);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void End::SetNonBlocking(bool on) {
  int fl = api.fcntl(fd, F_GETFL, 0);
  CHECK(fl >= 0, "F_GETFL");
  fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  CHECK(api.fcntl(fd, F_SETFL, fl) == 0, "F_SETFL");
  CHECK(((api.fcntl(fd, F_GETFL, 0) & O_NONBLOCK) != 0) == on,
        "F_GETFL after F_SETFL");
}

short End::Poll(short events, int timeout_ms) {
  pollfd p = {fd, events, 0};
  int n = api.poll(&p, 1, timeout_ms);
  CHECK(n >= 0, "poll");
  return n == 0 ? 0 : p.revents;
}

void End::Barrier() {
  ctl.Send(0x0BA4);
  CHECK(ctl.Recv() == 0x0BA4, "barrier out of step");
}

void End::Close() {
  CHECK(api.close(fd) == 0, "close");
  fd = -1;
}

std::string RunPair(const Transport& transport, const char* case_name,
                    const EndFn& server, const EndFn& client,
                    PairOptions options) {
  g_case = case_name;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return "socketpair failed";
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pids[2];
  for (int side = 0; side < 2; ++side) {
    pids[side] = fork();
    if (pids[side] == 0) {
      close(fds[1 - side]);
      RunEnd(transport, side == 0, fds[side], side == 0 ? server : client,
             options.watchdog_s);
    }
  }
  close(fds[0]);
  close(fds[1]);
  int status[2] = {0, 0};
  bool done[2] = {pids[0] < 0, pids[1] < 0};
  bool killed[2] = {false, false};
  const int64_t deadline = NowMs() + options.watchdog_s * 1000 + 5000;
  while (!done[0] || !done[1]) {
    for (int side = 0; side < 2; ++side) {
      if (!done[side] && waitpid(pids[side], &status[side], WNOHANG) == pids[side]) {
        done[side] = true;
      }
    }
    if (NowMs() > deadline) {
      for (int side = 0; side < 2; ++side) {
        if (done[side]) continue;
        kill(pids[side], SIGKILL);
        waitpid(pids[side], &status[side], 0);
        killed[side] = done[side] = true;
      }
    }
    if (!done[0] || !done[1]) usleep(2000);
  }
  if (pids[0] < 0 || pids[1] < 0) return "fork failed";
  return Describe("server", status[0], killed[0]) +
         Describe("client", status[1], killed[1]);
}

}  // namespace conformance
