// Runs the points of a benchmark for each transport, each transport in fresh
// child processes (VSOCKET_TRANSPORT is read once per process), and collects
// their results. The calling process itself never calls vsocket.
#ifndef VSOCKET_BENCHMARKS_BENCH_RUNNER_H_
#define VSOCKET_BENCHMARKS_BENCH_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench_result.h"

namespace vbench {

struct PointSpec {
  Mode mode;
  uint64_t msg_size;  // 1 for connect mode
};

struct RunPlan {
  bool local = true;   // fork a server child per transport on local_address
  std::string local_address = "127.0.0.1";
  std::string host;    // server to use when !local
  uint16_t port = 0;   // 0 with local: an ephemeral port
  std::vector<std::string> transports;
  std::vector<PointSpec> points;  // run in this order for each transport
  int warmup_ms = 100;
  int duration_ms = 300;
  int io_timeout_ms = 5000;
  uint64_t max_messages = 10'000'000;
  bool verbose = false;  // progress and server session logs on stderr
  bool zerocopy = false; // stream through the zero-copy calls (both ends)
  // Each end's VSOCKET_TRANSPORT when not the transport under test (local).
  std::string server_transport, client_transport;
  uint64_t recv_size = 0;  // stream receiver's bytes per recv; 0: bulk
};

// Results in order: transport by transport, point by point. A transport that
// is skipped contributes one kSkipped result; points that could not run
// (hung or crashed child) come back as kError with the cause. Bounded in
// time: every child is waited for with a deadline and killed past it.
std::vector<PointResult> run_plan(const RunPlan& plan);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_RUNNER_H_
