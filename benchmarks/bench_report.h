// Human-readable table and JSON output of a run.
#ifndef VSOCKET_BENCHMARKS_BENCH_REPORT_H_
#define VSOCKET_BENCHMARKS_BENCH_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "bench_result.h"

namespace vbench {

// What the run was, for the headers of the table and the JSON.
struct RunInfo {
  std::string role;    // "local" or "client"
  std::string server;  // "127.0.0.1 (forked)" or "HOST:PORT"
  std::vector<std::string> transports;
  int duration_ms = 0;
  int warmup_ms = 0;
  unsigned long long max_messages = 0;
  std::string spin_us;  // VSOCKET_SPIN_US as set, "" when unset
  bool zerocopy = false;  // --zerocopy: stream through the zero-copy calls
};

// One section per mode, one row per transport x size (sizes ascending,
// transports in run order), then skipped transports and errors.
void print_table(std::FILE* out, const RunInfo& info,
                 const std::vector<PointResult>& results);

// Writes the JSON document described at the top of vsocket_bench.cc.
// Returns false with *error set if the file cannot be written.
bool write_json(const std::string& path, const RunInfo& info,
                const std::vector<PointResult>& results, std::string* error);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_REPORT_H_
