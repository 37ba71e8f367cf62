#include "bench_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "bench_client.h"
#include "bench_clock.h"
#include "bench_net.h"
#include "bench_server.h"
#include "bench_socket_calls.h"
#include "vsocket/vsocket.h"

namespace vbench {
namespace {

// ---- Pipes between the parent and its children ----

template <typename T>
void write_struct(int fd, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  const char* p = reinterpret_cast<const char*>(&value);
  size_t left = sizeof value;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nothing better to do
    p += n;
    left -= size_t(n);
  }
}

enum class ReadOutcome { kOk, kEof, kTimeout };

// Reads one whole T, waiting at most timeout_ms in total.
template <typename T>
ReadOutcome read_struct(int fd, T* value, int timeout_ms) {
  static_assert(std::is_trivially_copyable_v<T>);
  char* p = reinterpret_cast<char*>(value);
  size_t got = 0;
  const int64_t deadline = now_ns() + int64_t{timeout_ms} * 1'000'000;
  while (got < sizeof *value) {
    int64_t left_ms = (deadline - now_ns()) / 1'000'000;
    if (left_ms <= 0) return ReadOutcome::kTimeout;
    pollfd pfd{fd, POLLIN, 0};
    int rc = poll(&pfd, 1, int(left_ms));
    if (rc < 0 && errno != EINTR) return ReadOutcome::kEof;
    if (rc <= 0) continue;
    ssize_t n = read(fd, p + got, sizeof *value - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ReadOutcome::kEof;
    got += size_t(n);
  }
  return ReadOutcome::kOk;
}

// ---- Child processes ----

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) +
           " (" + strsignal(WTERMSIG(status)) + ")";
  return "ended with wait status " + std::to_string(status);
}

struct ChildEnd {
  bool clean = false;  // exited with status 0
  std::string how;     // "exited with status 1", "killed by signal 11 (...)"
};

// Waits up to timeout_ms for pid to end, SIGKILLs it past that.
ChildEnd reap_child(pid_t pid, int timeout_ms) {
  const int64_t deadline = now_ns() + int64_t{timeout_ms} * 1'000'000;
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid)
      return {WIFEXITED(status) && WEXITSTATUS(status) == 0, describe_wait_status(status)};
    if (done < 0 && errno != EINTR) return {false, std::string("waitpid: ") + strerror(errno)};
    if (now_ns() >= deadline) break;
    usleep(5000);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {false, "did not exit within " + std::to_string(timeout_ms) + " ms; killed"};
}

// Everything a child does before its first vsocket call.
void enter_child(const std::string& transport) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the orchestrator
  setenv("VSOCKET_TRANSPORT", transport.c_str(), 1);
  UseKernelSockets(transport == kKernelTransport);
}

// Fork after flushing, so that buffered output is not written twice.
pid_t fork_child() {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw_errno("fork");
  return pid;
}

// What the server child tells the parent once it listens (or cannot).
struct ServerStartup {
  int32_t port = -1;
  int32_t transport_unavailable = 0;
  char error[200] = {};
};

[[noreturn]] void server_child_main(const RunPlan& plan, const std::string& transport,
                                    int ready_fd, int stop_fd) {
  enter_child(transport);
  ServerStartup startup;
  int listen_fd = -1;
  try {
    listen_fd = listen_on(plan.local_address.c_str(), plan.port);
    startup.port = local_port(listen_fd);
  } catch (const TransportUnavailable& e) {
    startup.transport_unavailable = 1;
    set_text(startup.error, e.what());
  } catch (const BenchError& e) {
    set_text(startup.error, std::string("server: ") + e.what());
  }
  write_struct(ready_fd, startup);
  close(ready_fd);
  if (startup.port < 0) std::exit(1);

  int rc = 0;
  try {
    serve(listen_fd, {stop_fd, 0, plan.io_timeout_ms, plan.verbose, plan.zerocopy,
                      size_t(plan.recv_size)});
  } catch (const BenchError& e) {
    std::fprintf(stderr, "vsocket-bench: %s server: %s\n", transport.c_str(), e.what());
    rc = 1;
  }
  Sock().close(listen_fd);
  std::exit(rc);  // exit(), not _exit(): let the library clean up
}

// `transport`: the one under test (the results' label); `policy`: this
// end's VSOCKET_TRANSPORT (the same unless --client-transport).
[[noreturn]] void client_child_main(const RunPlan& plan, const std::string& transport,
                                    const std::string& policy, uint16_t port,
                                    int result_fd) {
  enter_child(policy);
  ClientConfig cfg;
  cfg.transport = policy;
  cfg.warmup_ms = plan.warmup_ms;
  cfg.duration_ms = plan.duration_ms;
  cfg.io_timeout_ms = plan.io_timeout_ms;
  cfg.max_messages = plan.max_messages;
  cfg.zerocopy = plan.zerocopy;
  std::string resolve_error;
  try {
    cfg.server = resolve_peer(plan.local ? plan.local_address : plan.host, port);
  } catch (const BenchError& e) {
    resolve_error = e.what();
  }
  bool measured_any = false;
  for (const PointSpec& point : plan.points) {
    PointResult r;
    if (resolve_error.empty()) {
      r = run_point(cfg, point.mode, point.msg_size);
      set_text(r.transport, transport);
      // A fallback after points were measured on the transport is a failure
      // of this point, not a reason to call the whole transport skipped.
      if (r.status == Status::kSkipped && measured_any) {
        r.status = Status::kError;
        set_text(r.reason, std::string("connection fell back mid-run: ") + r.reason);
      }
      measured_any = measured_any || r.status == Status::kOk;
    } else {
      set_text(r.transport, transport);
      r.mode = point.mode;
      r.msg_size = point.msg_size;
      r.status = Status::kError;
      set_text(r.reason, resolve_error);
    }
    write_struct(result_fd, r);
    if (r.status == Status::kSkipped) break;  // it stands for the whole transport
  }
  close(result_fd);
  std::exit(0);
}

// ---- Per transport ----

PointResult unmeasured(const std::string& transport, const PointSpec& point,
                       Status status, const std::string& reason) {
  PointResult r;
  set_text(r.transport, transport);
  r.mode = point.mode;
  r.msg_size = point.msg_size;
  r.status = status;
  set_text(r.reason, reason);
  return r;
}

struct ServerChild {
  pid_t pid = -1;
  int stop_fd = -1;  // closing it tells the server to exit
  uint16_t port = 0;
};

// Starts the local server for transport. On failure returns false and sets
// *failure to the result that stands for the whole transport.
bool start_server_child(const RunPlan& plan, const std::string& transport,
                        ServerChild* server, PointResult* failure) {
  int ready[2], stop[2];
  if (pipe2(ready, O_CLOEXEC) != 0) throw_errno("pipe2");
  if (pipe2(stop, O_CLOEXEC) != 0) throw_errno("pipe2");
  pid_t pid = fork_child();
  if (pid == 0) {
    close(ready[0]);
    close(stop[1]);
    server_child_main(plan, transport, ready[1], stop[0]);
  }
  close(ready[1]);
  close(stop[0]);
  server->pid = pid;
  server->stop_fd = stop[1];

  ServerStartup startup;
  ReadOutcome got = read_struct(ready[0], &startup, plan.io_timeout_ms);
  close(ready[0]);
  if (got == ReadOutcome::kOk && startup.port >= 0) {
    server->port = uint16_t(startup.port);
    return true;
  }
  close(server->stop_fd);
  ChildEnd end = reap_child(pid, 1000);
  if (got != ReadOutcome::kOk) {
    *failure = unmeasured(transport, plan.points.front(), Status::kError,
                          "server child did not start: " + end.how);
  } else if (startup.transport_unavailable) {
    *failure = unmeasured(transport, plan.points.front(), Status::kSkipped,
                          "library refused VSOCKET_TRANSPORT=" + transport + " (" +
                              startup.error + ")");
  } else {
    *failure = unmeasured(transport, plan.points.front(), Status::kError, startup.error);
  }
  return false;
}

int point_budget_ms(const RunPlan& plan) {
  return plan.warmup_ms + plan.duration_ms + 2 * plan.io_timeout_ms + 2000;
}

void log_progress(const PointResult& r) {
  std::fprintf(stderr, "vsocket-bench: %s %s: %s%s%s\n", r.transport,
               point_label(r.mode, r.msg_size).c_str(), status_name(r.status),
               r.reason[0] ? ": " : "", r.reason);
}

// Runs all points in one client child; see run_plan for the contract.
std::vector<PointResult> run_client_child(const RunPlan& plan, const std::string& transport,
                                          uint16_t port, int server_stop_fd) {
  int results[2];
  if (pipe2(results, O_CLOEXEC) != 0) throw_errno("pipe2");
  pid_t pid = fork_child();
  if (pid == 0) {
    close(results[0]);
    if (server_stop_fd >= 0) close(server_stop_fd);
    client_child_main(plan, transport,
                      plan.client_transport.empty() ? transport : plan.client_transport,
                      port, results[1]);
  }
  close(results[1]);

  std::vector<PointResult> out;
  size_t next = 0;
  std::string lost;  // why the client stopped reporting, if it did
  while (next < plan.points.size()) {
    PointResult r;
    ReadOutcome got = read_struct(results[0], &r, point_budget_ms(plan));
    if (got == ReadOutcome::kTimeout) {
      kill(pid, SIGKILL);
      lost = "client hung: no result within " + std::to_string(point_budget_ms(plan)) +
             " ms; killed it";
      break;
    }
    if (got == ReadOutcome::kEof) {
      lost = "client child ended early";
      break;
    }
    if (plan.verbose) log_progress(r);
    out.push_back(r);
    ++next;
    if (r.status == Status::kSkipped) break;
  }
  close(results[0]);
  ChildEnd end = reap_child(pid, 2000);
  if (!lost.empty()) {
    out.push_back(unmeasured(transport, plan.points[next], Status::kError,
                             lost + " (" + end.how + ")"));
    for (++next; next < plan.points.size(); ++next)
      out.push_back(unmeasured(transport, plan.points[next], Status::kError,
                               "not run: the client was lost at an earlier point"));
  }
  return out;
}

std::vector<PointResult> run_transport(const RunPlan& plan, const std::string& transport) {
  if (!plan.local) return run_client_child(plan, transport, plan.port, -1);

  ServerChild server;
  PointResult failure;
  const std::string& server_policy =
      plan.server_transport.empty() ? transport : plan.server_transport;
  if (!start_server_child(plan, server_policy, &server, &failure)) {
    set_text(failure.transport, transport);
    if (plan.verbose) log_progress(failure);
    return {failure};
  }
  std::vector<PointResult> results = run_client_child(plan, transport, server.port, server.stop_fd);
  close(server.stop_fd);
  ChildEnd end = reap_child(server.pid, plan.io_timeout_ms + 1000);
  if (!end.clean)
    std::fprintf(stderr, "vsocket-bench: %s server child %s\n", transport.c_str(), end.how.c_str());
  return results;
}

}  // namespace

std::vector<PointResult> run_plan(const RunPlan& plan) {
  std::vector<PointResult> all;
  if (plan.points.empty()) return all;
  for (const std::string& transport : plan.transports) {
    std::vector<PointResult> results = run_transport(plan, transport);
    all.insert(all.end(), results.begin(), results.end());
  }
  return all;
}

}  // namespace vbench
