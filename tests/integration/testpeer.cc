// vsocket_testpeer: a real program acting as one end of a TCP connection for
// the integration tests. By default every socket call goes through the
// vsocket_* API; with --plain it calls libc directly and never enters vsocket.
//
// Usage:
//   vsocket_testpeer [OPTIONS] server --port N MODE [ARGS...]
//   vsocket_testpeer [OPTIONS] client --port N MODE [ARGS...]
//
// Roles (on 127.0.0.1, or --host IPV4):
//   server  listen on --port N (0 = ephemeral) and accept --conns N
//           connections one after another (default 1), running MODE on each.
//           --workers N: prefork; fork N workers after listen() that each
//           accept in a loop; the master stops them and exits 0 on SIGTERM.
//           --accept-delay-ms MS: sleep after listen() before the first accept.
//   client  connect to --port N and run MODE once.
// Options:
//   --plain             libc socket calls only (a genuinely plain TCP program)
//   --host IPV4         listen on / connect to this address (RDMA: the rxe one)
//   --setuid UID        setgid+setuid to UID before creating any socket
//   --new-pid-namespace run as pid 1 of a new PID namespace on this network
//                       namespace (a host-network container; needs root)
//   --ctl-in FD --ctl-out FD   control pipe for the poll-* modes
// Modes (independent of the role):
//   sink [--reply-bytes N --reply-seed S]  read to EOF, then optionally send
//                       N bytes of stream S and close
//   source BYTES SEED [--stall-after N]    write BYTES of stream SEED in
//                       random-sized writes (1 B..256 KiB), shutdown(SHUT_WR),
//                       read the peer's reply to EOF; with --stall-after,
//                       stop writing after N bytes and sleep until killed
//   echo                echo until EOF
//   banner              write kBanner right after the connection is up, echo
//   roundtrip COUNT SEED [--expect-banner]   COUNT ping-pong messages with an
//                       echo peer (after checking the banner)
//   survivor READY      peer_killed survivor (see testpeer_modes.cc)
//   close-unread READ DELAY_MS   read READ bytes, wait, close with data unread
//   send-then-recv BYTES SEED    send, then report one recv and one send
//   poll-probe / poll-partner    scripted readiness checks (plain poll())
//
// Output: one protocol line per event on stdout, "TAG key=value ...":
//   port port=N                      server, always line 1
//   listening t_ns=T                 server, before the accept delay
//   workers pids=P1,P2,...           prefork master
//   conn role=R pid=P uid=U path=shm|tcp|plain reason=WHY t_ns=T
//                                    each connection, right after accept/connect
//   done pid=P path=... reason=...   each connection, just before close
//   sent / received / shutdown / echoed / banner / roundtrip / ready / eof /
//   ... as documented at each mode
//   error op=OP errno=NAME           a call failed unexpectedly (exit 2)
// Exit status: 0 success, 1 usage error, 2 unexpected call failure, 3 a mode
// reported failure.
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "testpeer_io.h"
#include "testpeer_modes.h"

namespace testpeer {
namespace {

struct Config {
  bool plain = false;
  std::string role;
  int port = -1;
  std::string host = "127.0.0.1";
  int conns = 1;
  int workers = 0;
  int accept_delay_ms = 0;
  long setuid_to = -1;
  bool new_pid_namespace = false;
  ModeConfig mode;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "vsocket_testpeer: %s (see the top of testpeer.cc)\n", why.c_str());
  std::exit(1);
}

Config ParseArgs(int argc, char** argv) {
  Config c;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--plain") c.plain = true;
    else if (a == "--expect-banner") c.mode.expect_banner = true;
    else if (a == "--port") c.port = std::atoi(value().c_str());
    else if (a == "--host") c.host = value();
    else if (a == "--conns") c.conns = std::atoi(value().c_str());
    else if (a == "--workers") c.workers = std::atoi(value().c_str());
    else if (a == "--accept-delay-ms") c.accept_delay_ms = std::atoi(value().c_str());
    else if (a == "--setuid") c.setuid_to = std::atol(value().c_str());
    else if (a == "--new-pid-namespace") c.new_pid_namespace = true;
    else if (a == "--ctl-in") c.mode.ctl_in = std::atoi(value().c_str());
    else if (a == "--ctl-out") c.mode.ctl_out = std::atoi(value().c_str());
    else if (a == "--reply-bytes") c.mode.reply_bytes = std::atoll(value().c_str());
    else if (a == "--reply-seed") c.mode.reply_seed = std::strtoull(value().c_str(), nullptr, 0);
    else if (a == "--stall-after") c.mode.stall_after = std::atoll(value().c_str());
    else if (a.starts_with("--")) Usage("unknown option " + a);
    else positional.push_back(a);
  }
  if (positional.size() < 2) Usage("need ROLE and MODE");
  c.role = positional[0];
  c.mode.name = positional[1];
  c.mode.args.assign(positional.begin() + 2, positional.end());
  if (c.role != "server" && c.role != "client") Usage("unknown role " + c.role);
  if (c.port < 0) Usage("--port is required");
  std::string bad = ValidateMode(c.mode);
  if (!bad.empty()) Usage(bad);
  return c;
}

void DropPrivileges(long uid) {
  if (setgroups(0, nullptr) != 0) Die("setgroups");
  if (setgid(static_cast<gid_t>(uid)) != 0) Die("setgid");
  if (setuid(static_cast<uid_t>(uid)) != 0) Die("setuid");
}

// The rest of the program runs in a forked child, pid 1 of a new PID
// namespace; this process waits and exits as the child did.
void EnterNewPidNamespace() {
  if (unshare(CLONE_NEWPID) != 0) Die("unshare");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) return;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) Die("waitpid");
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

sockaddr_in Address(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) Usage("bad --host " + host);
  return a;
}

// Reports the connection, runs the mode, reports again and closes.
bool HandleConnection(const Config& c, int fd) {
  Emit("conn role=%s pid=%d uid=%d path=%s reason=%s t_ns=%lld", c.role.c_str(), getpid(),
       static_cast<int>(geteuid()), PathOf(fd).c_str(), ReasonOf(fd).c_str(),
       static_cast<long long>(NowNs()));
  bool ok = RunMode(c.mode, &fd);
  if (fd >= 0) {
    Emit("done pid=%d path=%s reason=%s", getpid(), PathOf(fd).c_str(),
         ReasonOf(fd).c_str());
    if (Api().close(fd) != 0) Die("close");
  }
  return ok;
}

int Accept(int lfd) {
  for (;;) {
    int fd = Api().accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EINTR) Die("accept");
  }
}

// Prefork: N workers accept on the shared listener until the master, on
// SIGTERM, stops them.
int RunPrefork(const Config& c, int lfd) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  std::vector<pid_t> workers;
  std::string pids;
  for (int i = 0; i < c.workers; ++i) {
    pid_t pid = fork();
    if (pid < 0) Die("fork");
    if (pid == 0) {
      sigprocmask(SIG_UNBLOCK, &term, nullptr);
      for (;;) HandleConnection(c, Accept(lfd));
    }
    workers.push_back(pid);
    pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  }
  Emit("workers pids=%s", pids.c_str());
  int sig = 0;
  sigwait(&term, &sig);
  int failed = 0;
  for (pid_t pid : workers) kill(pid, SIGTERM);
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) ++failed;
  }
  Emit("workers_stopped n=%zu unexpected=%d", workers.size(), failed);
  return failed == 0 ? 0 : 3;
}

int RunServer(const Config& c) {
  int lfd = Api().socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) Die("socket");
  int one = 1;
  if (Api().setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    Die("setsockopt");
  }
  sockaddr_in addr = Address(c.host, c.port);
  if (Api().bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind");
  if (Api().listen(lfd, 128) != 0) Die("listen");
  socklen_t len = sizeof(addr);
  if (Api().getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("getsockname");
  }
  Emit("port port=%d", ntohs(addr.sin_port));
  Emit("listening t_ns=%lld", static_cast<long long>(NowNs()));
  if (c.accept_delay_ms > 0) SleepMs(c.accept_delay_ms);
  if (c.workers > 0) return RunPrefork(c, lfd);
  bool ok = true;
  for (int i = 0; i < c.conns; ++i) ok = HandleConnection(c, Accept(lfd)) && ok;
  Api().close(lfd);
  return ok ? 0 : 3;
}

int RunClient(const Config& c) {
  int fd = Api().socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  sockaddr_in addr = Address(c.host, c.port);
  int r;
  do {
    r = Api().connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (r != 0 && errno == EINTR);
  if (r != 0) Die("connect");
  return HandleConnection(c, fd) ? 0 : 3;
}

}  // namespace
}  // namespace testpeer

int main(int argc, char** argv) {
  using namespace testpeer;
  Config c = ParseArgs(argc, argv);
  if (c.new_pid_namespace) EnterNewPidNamespace();
  SelectApi(c.plain);
  if (c.setuid_to >= 0) DropPrivileges(c.setuid_to);
  return c.role == "server" ? RunServer(c) : RunClient(c);
}
