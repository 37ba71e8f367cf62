// vsocket-bench: latency, throughput and connection-rate benchmark of
// vsocket transports against plain kernel TCP, in the style of iperf3.
//
//   vsocket-bench --local [options]           fork server + client here
//   vsocket-bench --server [--port P]         serve remote clients
//   vsocket-bench --client HOST [options]     measure against a server
// (`vsocket-bench --help` lists every option.)
//
// Each transport named by --transports runs in fresh processes with
// VSOCKET_TRANSPORT set before their first vsocket call; "tcp", the
// baseline of every ratio, makes plain system calls instead, without
// vsocket at all (bench_socket_calls.h). If a connection
// lands on another transport than requested, that transport is reported as
// skipped with vsocket_fallback_reason(). Modes (bench_protocol.h has the
// wire details):
//   pingpong  client sends N bytes, server reads exactly N and echoes them;
//             every round trip is timed with CLOCK_MONOTONIC.
//   stream    client sends N-byte messages back to back; the server counts
//             the bytes it receives and its own elapsed time.
//   connect   connect + accept + 1-byte echo + close, repeated.
// CPU is getrusage(RUSAGE_SELF) user+sys of each end over its measured
// window; the server sends its own figures back at the end of each point.
//
// ---- JSON written by --json FILE ----
// One object:
//   tool            "vsocket-bench"
//   format_version  1
//   role            "local" | "client"
//   server          where the server was ("127.0.0.1 (forked per transport)"
//                   or "HOST:PORT")
//   transports      [string] requested, in run order
//   duration_ms     measured window per point
//   warmup_ms       unmeasured traffic before each point
//   max_messages    cap on messages per phase
//   spin_us         VSOCKET_SPIN_US as set in the environment, or null
//   results         [object], one per point, in run order:
//     transport         requested VSOCKET_TRANSPORT value
//     actual_transport  vsocket_transport_name() of the connection ("" if
//                       no connection was made)
//     mode              "pingpong" | "stream" | "connect"
//     msg_size          message size in bytes (1 for connect)
//     status            "ok" | "skipped" | "error"; a skipped transport has
//                       one result standing for all its points
//     reason            why skipped / what failed; "" when ok
//     messages          round trips (pingpong), messages counted by the
//                       receiver (stream), connections (connect)
//     bytes             payload bytes in the window, both directions
//     elapsed_s         length of the measured window
//     latency_min_us, latency_p50_us, latency_p99_us, latency_p999_us,
//     latency_max_us, latency_mean_us
//                       round-trip latency (pingpong), first-byte latency:
//                       before connect() to the echo in hand (connect);
//                       null for stream
//     connect_call_p50_us, connect_call_p99_us
//                       the connect() call alone (connect; null otherwise)
//     gb_per_s          bytes / 1e9 / elapsed_s
//     messages_per_s    messages / elapsed_s (connections/s for connect)
//     client_user_us, client_sys_us, client_messages
//     server_user_us, server_sys_us, server_messages
//                       CPU of each end over its own window and how many
//                       messages it handled in it
//     cpu_us_per_msg    client CPU/client_messages + server CPU/server_messages
//     cpu_s_per_gb      CPU seconds per 1e9 payload bytes (null for connect)
//     speedup_vs_tcp    vs the tcp result of the same mode and size: tcp
//                       p50 / p50 (pingpong), GB/s ratio (stream), rate
//                       ratio (connect); > 1 is better; null without tcp
// Rate and CPU fields are null unless status is "ok".

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_net.h"
#include "bench_options.h"
#include "bench_plot.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "bench_server.h"
#include "bench_socket_calls.h"
#include "vsocket/vsocket.h"

namespace vbench {
namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// --server: serve until killed, or until idle for --idle-exit-ms.
int run_server_role(const Options& options) {
  uint16_t port = options.port > 0 ? uint16_t(options.port) : kDefaultPort;
  int listen_fd = -1;
  try {
    std::string transport = env_or_empty("VSOCKET_TRANSPORT");
    UseKernelSockets(transport == kKernelTransport);
    listen_fd = listen_on("0.0.0.0", port);
    std::printf("vsocket-bench server listening on 0.0.0.0:%u (VSOCKET_TRANSPORT=%s)\n",
                unsigned(port), transport.empty() ? "unset" : transport.c_str());
    std::fflush(stdout);
    serve(listen_fd, {-1, options.idle_exit_ms, options.io_timeout_ms, options.verbose,
                      options.zerocopy, size_t(options.recv_size)});
  } catch (const BenchError& e) {
    std::fprintf(stderr, "vsocket-bench: %s\n", e.what());
    close_quietly(listen_fd);
    return 1;
  }
  vsocket_close(listen_fd);
  return 0;
}

RunPlan make_plan(const Options& options) {
  RunPlan plan;
  plan.local = options.role == Role::kLocal;
  plan.host = options.host;
  plan.local_address = options.local_address;
  if (options.port > 0) plan.port = uint16_t(options.port);
  else plan.port = plan.local ? 0 : kDefaultPort;
  plan.transports = options.transports;
  for (Mode mode : options.modes) {
    if (mode == Mode::kConnect) {
      plan.points.push_back({mode, 1});
      continue;
    }
    for (uint64_t size : options.sizes) plan.points.push_back({mode, size});
  }
  plan.warmup_ms = options.warmup_ms;
  plan.duration_ms = options.duration_ms;
  plan.io_timeout_ms = options.io_timeout_ms;
  plan.max_messages = options.max_messages;
  plan.verbose = options.verbose;
  plan.zerocopy = options.zerocopy;
  plan.server_transport = options.server_transport;
  plan.client_transport = options.client_transport;
  plan.recv_size = options.recv_size;
  return plan;
}

// --local / --client: run, print, write files. 1 if any point failed.
int run_benchmark_role(const Options& options) {
  RunPlan plan = make_plan(options);
  std::vector<PointResult> results;
  try {
    results = run_plan(plan);
  } catch (const BenchError& e) {  // fork/pipe failures in the orchestrator
    std::fprintf(stderr, "vsocket-bench: %s\n", e.what());
    return 1;
  }

  RunInfo info;
  info.role = plan.local ? "local" : "client";
  info.server = plan.local ? plan.local_address + " (forked per transport)"
                           : plan.host + ":" + std::to_string(plan.port);
  info.transports = plan.transports;
  info.duration_ms = plan.duration_ms;
  info.warmup_ms = plan.warmup_ms;
  info.max_messages = plan.max_messages;
  info.spin_us = env_or_empty("VSOCKET_SPIN_US");
  info.zerocopy = plan.zerocopy;
  print_table(stdout, info, results);

  int status = 0;
  for (const PointResult& r : results)
    if (r.status == Status::kError) status = 1;
  std::string error;
  if (!options.json_path.empty() && !write_json(options.json_path, info, results, &error)) {
    std::fprintf(stderr, "vsocket-bench: %s\n", error.c_str());
    status = 1;
  }
  if (!options.svg_path.empty()) {
    std::string title = "vsocket-bench --" + info.role + ": server " + info.server + ", " +
                        std::to_string(info.duration_ms) + " ms per point";
    if (!info.spin_us.empty()) title += ", VSOCKET_SPIN_US=" + info.spin_us;
    if (!write_svg(options.svg_path, title, plan.transports, results, &error)) {
      std::fprintf(stderr, "vsocket-bench: %s\n", error.c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace
}  // namespace vbench

int main(int argc, char** argv) {
  using namespace vbench;
  Options options;
  std::string error;
  if (!parse_options(argc, argv, &options, &error)) {
    if (error.empty()) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "vsocket-bench: %s (see --help)\n", error.c_str());
    return 2;
  }
  // A peer that goes away must show up as EPIPE, not kill the process.
  signal(SIGPIPE, SIG_IGN);
  if (options.role == Role::kServer) return run_server_role(options);
  return run_benchmark_role(options);
}
