#include "bench_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>


namespace vbench {
namespace {

// Ok results of one mode, by size ascending then transport in run order.
std::vector<const PointResult*> ok_rows(const std::vector<PointResult>& results,
                                        const std::vector<std::string>& transports,
                                        Mode mode) {
  std::vector<const PointResult*> rows;
  for (const PointResult& r : results)
    if (r.status == Status::kOk && r.mode == mode) rows.push_back(&r);
  auto order = [&](const PointResult* r) {
    return size_t(std::find(transports.begin(), transports.end(), r->transport) -
                  transports.begin());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const PointResult* a, const PointResult* b) {
    if (a->msg_size != b->msg_size) return a->msg_size < b->msg_size;
    return order(a) < order(b);
  });
  return rows;
}

std::string speedup_text(const PointResult& r, const std::vector<PointResult>& all) {
  std::optional<double> speedup = speedup_vs_tcp(r, all);
  if (!speedup) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", *speedup);
  return buf;
}

// Transport label: "auto" shows what it became, e.g. "auto(shm)".
std::string transport_label(const PointResult& r) {
  std::string label = r.transport;
  if (label != r.actual_transport && r.actual_transport[0] != '\0')
    label += "(" + std::string(r.actual_transport) + ")";
  return label;
}

void print_pingpong(std::FILE* out, const std::vector<const PointResult*>& rows,
                    const std::vector<PointResult>& all) {
  std::fprintf(out, "\nPing-pong round-trip latency (us); vs tcp = tcp p50 / p50\n");
  std::fprintf(out, "%-10s %9s %9s %9s %9s %9s %9s %11s %10s %9s %7s\n", "transport",
               "size", "min", "p50", "p99", "p99.9", "max", "round trips",
               "CPU us/msg", "CPU s/GB", "vs tcp");
  for (const PointResult* r : rows) {
    Metrics m = derive_metrics(*r);
    const LatencySummary& l = r->latency;
    std::fprintf(out, "%-10s %9s %9.2f %9.2f %9.2f %9.2f %9.2f %11llu %10.2f %9.2f %7s\n",
                 transport_label(*r).c_str(), format_size(r->msg_size).c_str(), l.min_us,
                 l.p50_us, l.p99_us, l.p999_us, l.max_us,
                 static_cast<unsigned long long>(r->messages), m.cpu_us_per_msg,
                 m.cpu_s_per_gb, speedup_text(*r, all).c_str());
  }
}

void print_stream(std::FILE* out, const std::vector<const PointResult*>& rows,
                  const std::vector<PointResult>& all) {
  std::fprintf(out, "\nStreaming throughput (counted by the receiver); vs tcp = GB/s ratio\n");
  std::fprintf(out, "%-10s %9s %9s %10s %10s %9s %7s\n", "transport", "size", "GB/s",
               "Mmsg/s", "CPU us/msg", "CPU s/GB", "vs tcp");
  for (const PointResult* r : rows) {
    Metrics m = derive_metrics(*r);
    std::fprintf(out, "%-10s %9s %9.3f %10.4f %10.3f %9.3f %7s\n",
                 transport_label(*r).c_str(), format_size(r->msg_size).c_str(),
                 m.gb_per_s, m.msgs_per_s / 1e6, m.cpu_us_per_msg, m.cpu_s_per_gb,
                 speedup_text(*r, all).c_str());
  }
}

void print_connect(std::FILE* out, const std::vector<const PointResult*>& rows,
                   const std::vector<PointResult>& all) {
  std::fprintf(out, "\nConnection setup (connect + accept + 1-byte echo + close); "
                    "vs tcp = rate ratio\n");
  std::fprintf(out, "(us: connect = the connect() call; 1st byte = from before connect() "
                    "to the echo in hand)\n");
  std::fprintf(out, "%-10s %10s %12s %11s %9s %9s %9s %9s %7s\n", "transport", "conn/s",
               "connections", "CPU us/conn", "conn p50", "conn p99", "1st p50",
               "1st p99", "vs tcp");
  for (const PointResult* r : rows) {
    Metrics m = derive_metrics(*r);
    std::fprintf(out, "%-10s %10.0f %12llu %11.2f %9.1f %9.1f %9.1f %9.1f %7s\n",
                 transport_label(*r).c_str(), m.msgs_per_s,
                 static_cast<unsigned long long>(r->messages), m.cpu_us_per_msg,
                 r->connect_call.p50_us, r->connect_call.p99_us, r->latency.p50_us,
                 r->latency.p99_us, speedup_text(*r, all).c_str());
  }
}

// ---- JSON ----

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Appends `"key": value` pairs; multiline puts each on its own line.
class JsonObject {
 public:
  explicit JsonObject(bool multiline = false) : multiline_(multiline) {}
  void raw(const char* key, const std::string& value) {
    const char* separator = multiline_ ? ",\n  " : ", ";
    text_ += (text_.empty() ? "" : separator) + json_string(key) + ": " + value;
  }
  void str(const char* key, const std::string& v) { raw(key, json_string(v)); }
  void num(const char* key, double v) { raw(key, json_number(v)); }
  void uint(const char* key, unsigned long long v) { raw(key, std::to_string(v)); }
  void num_or_null(const char* key, bool present, double v) {
    raw(key, present ? json_number(v) : "null");
  }
  std::string done() const {
    return multiline_ ? "{\n  " + text_ + "\n}" : "{" + text_ + "}";
  }

 private:
  bool multiline_;
  std::string text_;
};

std::string result_json(const PointResult& r, const std::vector<PointResult>& all) {
  const bool ok = r.status == Status::kOk;
  const bool latency = ok && r.has_latency;
  Metrics m = derive_metrics(r);
  std::optional<double> speedup = speedup_vs_tcp(r, all);
  JsonObject o;
  o.str("transport", r.transport);
  o.str("actual_transport", r.actual_transport);
  o.str("mode", mode_name(r.mode));
  o.uint("msg_size", r.msg_size);
  o.str("status", status_name(r.status));
  o.str("reason", r.reason);
  o.uint("messages", r.messages);
  o.uint("bytes", r.bytes);
  o.num_or_null("elapsed_s", ok, m.seconds);
  o.num_or_null("latency_min_us", latency, r.latency.min_us);
  o.num_or_null("latency_p50_us", latency, r.latency.p50_us);
  o.num_or_null("latency_p99_us", latency, r.latency.p99_us);
  o.num_or_null("latency_p999_us", latency, r.latency.p999_us);
  o.num_or_null("latency_max_us", latency, r.latency.max_us);
  o.num_or_null("latency_mean_us", latency, r.latency.mean_us);
  const bool connect_call = ok && r.has_connect_call;
  o.num_or_null("connect_call_p50_us", connect_call, r.connect_call.p50_us);
  o.num_or_null("connect_call_p99_us", connect_call, r.connect_call.p99_us);
  o.num_or_null("gb_per_s", ok, m.gb_per_s);
  o.num_or_null("messages_per_s", ok, m.msgs_per_s);
  o.uint("client_user_us", static_cast<unsigned long long>(r.client_cpu.user_us));
  o.uint("client_sys_us", static_cast<unsigned long long>(r.client_cpu.sys_us));
  o.uint("client_messages", r.client_messages);
  o.uint("server_user_us", static_cast<unsigned long long>(r.server_cpu.user_us));
  o.uint("server_sys_us", static_cast<unsigned long long>(r.server_cpu.sys_us));
  o.uint("server_messages", r.server_messages);
  o.num_or_null("cpu_us_per_msg", ok, m.cpu_us_per_msg);
  o.num_or_null("cpu_s_per_gb", ok && r.mode != Mode::kConnect, m.cpu_s_per_gb);
  o.num_or_null("speedup_vs_tcp", speedup.has_value(), speedup.value_or(0));
  return o.done();
}

}  // namespace

void print_table(std::FILE* out, const RunInfo& info, const std::vector<PointResult>& results) {
  std::fprintf(out, "vsocket-bench %s, server %s, %d ms measured + %d ms warm-up per point, "
                    "VSOCKET_SPIN_US=%s\n",
               info.role.c_str(), info.server.c_str(), info.duration_ms, info.warmup_ms,
               info.spin_us.empty() ? "(unset)" : info.spin_us.c_str());
  std::fprintf(out, "CPU = getrusage user+sys of client + server processes over the window"
                    "; GB = 1e9 bytes\n");
  if (info.zerocopy)
    std::fprintf(out, "stream: zero-copy calls (vsocket_send_registered from a registered "
                      "buffer, vsocket_recv_inplace + vsocket_recv_release)\n");
  const Mode modes[] = {Mode::kPingPong, Mode::kStream, Mode::kConnect};
  for (Mode mode : modes) {
    std::vector<const PointResult*> rows = ok_rows(results, info.transports, mode);
    if (rows.empty()) continue;
    if (mode == Mode::kPingPong) print_pingpong(out, rows, results);
    if (mode == Mode::kStream) print_stream(out, rows, results);
    if (mode == Mode::kConnect) print_connect(out, rows, results);
  }
  bool header = false;
  for (const PointResult& r : results) {
    if (r.status == Status::kOk) continue;
    if (!header) std::fprintf(out, "\nNot measured\n");
    header = true;
    if (r.status == Status::kSkipped)
      std::fprintf(out, "%-10s skipped: %s\n", r.transport, r.reason);
    else
      std::fprintf(out, "%-10s %s: error: %s\n", r.transport,
                   point_label(r.mode, r.msg_size).c_str(), r.reason);
  }
}

bool write_json(const std::string& path, const RunInfo& info,
                const std::vector<PointResult>& results, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string transports;
  for (const std::string& t : info.transports)
    transports += (transports.empty() ? "" : ", ") + json_string(t);
  JsonObject top(/*multiline=*/true);
  top.str("tool", "vsocket-bench");
  top.uint("format_version", 1);
  top.str("role", info.role);
  top.str("server", info.server);
  top.raw("transports", "[" + transports + "]");
  top.uint("duration_ms", unsigned(info.duration_ms));
  top.uint("warmup_ms", unsigned(info.warmup_ms));
  top.uint("max_messages", info.max_messages);
  top.raw("spin_us", info.spin_us.empty() ? "null" : json_string(info.spin_us));
  top.raw("zerocopy", info.zerocopy ? "true" : "false");
  std::string rows;
  for (const PointResult& r : results)
    rows += (rows.empty() ? "\n    " : ",\n    ") + result_json(r, results);
  top.raw("results", "[" + rows + "\n  ]");
  std::fprintf(f, "%s\n", top.done().c_str());
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  ok = std::fclose(f) == 0 && ok;
  if (!ok) *error = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

}  // namespace vbench
