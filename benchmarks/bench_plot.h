// SVG plot of a run, written directly (no plotting dependency).
#ifndef VSOCKET_BENCHMARKS_BENCH_PLOT_H_
#define VSOCKET_BENCHMARKS_BENCH_PLOT_H_

#include <string>
#include <vector>

#include "bench_result.h"

namespace vbench {

// Three panels against message size, every axis a log one: p50 ping-pong
// latency, stream throughput, and CPU per message of both ends (stream
// solid, ping-pong round trip dashed); one colour per transport (in the
// order given), with a legend.  Panels without data say so; points whose
// value is not positive are left out.
// Returns false with *error set if the file cannot be written.
bool write_svg(const std::string& path, const std::string& title,
               const std::vector<std::string>& transports,
               const std::vector<PointResult>& results, std::string* error);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_PLOT_H_
