// What one measurement point produces, and the figures derived from it.
#ifndef VSOCKET_BENCHMARKS_BENCH_RESULT_H_
#define VSOCKET_BENCHMARKS_BENCH_RESULT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bench_clock.h"

namespace vbench {

// The values are also the wire encoding of the mode in a session request.
enum class Mode : uint32_t { kPingPong = 1, kStream = 2, kConnect = 3 };

const char* mode_name(Mode mode);
std::optional<Mode> parse_mode(std::string_view name);

// "64 B", "4 KiB", "1 MiB" for whole multiples, else bytes.
std::string format_size(uint64_t bytes);

// "pingpong 64 B", "stream 1 MiB", "connect" (connect has no size).
std::string point_label(Mode mode, uint64_t msg_size);

enum class Status : uint32_t { kOk = 0, kSkipped = 1, kError = 2 };

const char* status_name(Status status);

// Round-trip latency distribution in microseconds (nearest-rank percentiles).
struct LatencySummary {
  double min_us = 0, p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0,
         mean_us = 0;
};

// Sorts samples_ns in place. Requires a non-empty vector.
LatencySummary summarize_latency(std::vector<int64_t>& samples_ns);

// One transport x mode x size measurement. Trivially copyable: the client
// process writes it raw into a pipe to the orchestrating parent.
// A skipped transport is one PointResult with status kSkipped for the whole
// transport (its mode/msg_size are those of the point that detected it).
struct PointResult {
  char transport[16] = {};         // requested VSOCKET_TRANSPORT value
  char actual_transport[16] = {};  // vsocket_transport_name() of the conn
  Mode mode = Mode::kPingPong;
  Status status = Status::kOk;
  uint64_t msg_size = 0;
  char reason[200] = {};  // why skipped / what failed; "" when ok

  // Measured window. "Messages" are round trips (pingpong), messages
  // counted by the receiver (stream) or connections (connect).
  uint64_t messages = 0;
  uint64_t bytes = 0;  // payload bytes moved in the window, both directions
  int64_t elapsed_ns = 0;
  // pingpong: round trips.  connect: first-byte latency, from before
  // connect() to the echo of the first byte in hand.
  bool has_latency = false;
  LatencySummary latency;
  // connect only: how long the connect() call itself took.
  bool has_connect_call = false;
  LatencySummary connect_call;

  // CPU of each end over its own measured window, and how many messages
  // that end handled in that window.
  CpuTime client_cpu;
  CpuTime server_cpu;
  uint64_t client_messages = 0;
  uint64_t server_messages = 0;
};
static_assert(std::is_trivially_copyable_v<PointResult>);

// Copies text into a fixed char array, truncating, always NUL-terminated.
template <size_t N>
void set_text(char (&dst)[N], std::string_view text) {
  size_t n = text.size() < N - 1 ? text.size() : N - 1;
  for (size_t i = 0; i < n; ++i) dst[i] = text[i];
  dst[n] = '\0';
}

// Rates and costs derived from a kOk PointResult.
struct Metrics {
  double seconds = 0;
  double gb_per_s = 0;      // bytes / 1e9 / seconds
  double msgs_per_s = 0;    // messages / seconds
  double cpu_us_per_msg = 0;  // client + server CPU per message
  double cpu_s_per_gb = 0;    // client + server CPU seconds per 1e9 bytes
};

Metrics derive_metrics(const PointResult& r);

// The figure compared across transports: p50 latency (lower is better) for
// pingpong, GB/s for stream, connections/s for connect.
double headline_value(const PointResult& r);

// Speedup of r over the tcp result for the same mode and size (>1 means r
// is better), or nullopt when there is no ok tcp result to compare with.
std::optional<double> speedup_vs_tcp(const PointResult& r,
                                     const std::vector<PointResult>& all);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_RESULT_H_
