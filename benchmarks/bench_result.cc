#include "bench_result.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace vbench {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kPingPong: return "pingpong";
    case Mode::kStream: return "stream";
    case Mode::kConnect: return "connect";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view name) {
  if (name == "pingpong") return Mode::kPingPong;
  if (name == "stream") return Mode::kStream;
  if (name == "connect") return Mode::kConnect;
  return std::nullopt;
}

std::string format_size(uint64_t bytes) {
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string point_label(Mode mode, uint64_t msg_size) {
  if (mode == Mode::kConnect) return mode_name(mode);
  return std::string(mode_name(mode)) + " " + format_size(msg_size);
}

const char* status_name(Status status) {
  switch (status) {
    case Status::kOk: return "ok";
    case Status::kSkipped: return "skipped";
    case Status::kError: return "error";
  }
  return "?";
}

LatencySummary summarize_latency(std::vector<int64_t>& samples_ns) {
  std::sort(samples_ns.begin(), samples_ns.end());
  const size_t n = samples_ns.size();
  // Nearest rank: the smallest sample with at least p% of samples <= it.
  auto percentile_us = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(n)));
    size_t index = rank == 0 ? 0 : std::min(rank, n) - 1;
    return double(samples_ns[index]) / 1e3;
  };
  double sum_ns = 0;
  for (int64_t s : samples_ns) sum_ns += double(s);

  LatencySummary out;
  out.min_us = double(samples_ns.front()) / 1e3;
  out.p50_us = percentile_us(50);
  out.p99_us = percentile_us(99);
  out.p999_us = percentile_us(99.9);
  out.max_us = double(samples_ns.back()) / 1e3;
  out.mean_us = sum_ns / double(n) / 1e3;
  return out;
}

Metrics derive_metrics(const PointResult& r) {
  Metrics m;
  m.seconds = double(r.elapsed_ns) / 1e9;
  if (m.seconds > 0) {
    m.gb_per_s = double(r.bytes) / 1e9 / m.seconds;
    m.msgs_per_s = double(r.messages) / m.seconds;
  }
  if (r.client_messages > 0)
    m.cpu_us_per_msg += double(r.client_cpu.total_us()) / double(r.client_messages);
  if (r.server_messages > 0)
    m.cpu_us_per_msg += double(r.server_cpu.total_us()) / double(r.server_messages);
  if (r.messages > 0 && r.bytes > 0) {
    double bytes_per_msg = double(r.bytes) / double(r.messages);
    m.cpu_s_per_gb = m.cpu_us_per_msg / 1e6 * (1e9 / bytes_per_msg);
  }
  return m;
}

double headline_value(const PointResult& r) {
  switch (r.mode) {
    case Mode::kPingPong: return r.latency.p50_us;
    case Mode::kStream: return derive_metrics(r).gb_per_s;
    case Mode::kConnect: return derive_metrics(r).msgs_per_s;
  }
  return 0;
}

std::optional<double> speedup_vs_tcp(const PointResult& r,
                                     const std::vector<PointResult>& all) {
  if (r.status != Status::kOk) return std::nullopt;
  for (const PointResult& base : all) {
    if (base.status != Status::kOk || std::strcmp(base.transport, "tcp") != 0 ||
        base.mode != r.mode || base.msg_size != r.msg_size)
      continue;
    double mine = headline_value(r), theirs = headline_value(base);
    if (mine <= 0 || theirs <= 0) return std::nullopt;
    // Latency: lower is better, so invert.
    return r.mode == Mode::kPingPong ? theirs / mine : mine / theirs;
  }
  return std::nullopt;
}

}  // namespace vbench
