#include "bench_client.h"

#include <errno.h>

#include <algorithm>
#include <vector>

#include "bench_clock.h"
#include "bench_protocol.h"
#include "bench_socket_calls.h"
#include "vsocket/vsocket.h"

namespace vbench {
namespace {

// A message of msg_size bytes with a recognisable pattern after the flag.
std::vector<uint8_t> make_message(size_t msg_size) {
  std::vector<uint8_t> msg(msg_size);
  for (size_t i = 0; i < msg_size; ++i) msg[i] = uint8_t(i * 31 + 7);
  return msg;
}

int64_t deadline_after_ms(int ms) { return now_ns() + int64_t{ms} * 1'000'000; }

// Empty when the connection is on the requested transport, otherwise why not.
std::string transport_mismatch(int fd, const std::string& requested) {
  std::string actual = transport_of(fd);
  if (actual.empty())
    throw BenchError("vsocket_transport_name() returned NULL for a connected socket");
  if (requested == "auto" || actual == requested) return "";
  std::string reason = fallback_reason_of(fd);
  // No fallback reason but another transport: the library does not know the
  // requested one (it takes an unknown VSOCKET_TRANSPORT as auto).
  if (reason.empty())
    reason = "library does not offer '" + requested + "'; connection took " + actual;
  return reason;
}

void measure_pingpong(int fd, const ClientConfig& cfg, size_t msg_size,
                      PointResult* r) {
  std::vector<uint8_t> out = make_message(msg_size), in(msg_size);
  auto round_trip = [&](uint8_t flag) {
    out[0] = flag;
    send_all(fd, out.data(), msg_size);
    if (!recv_all(fd, in.data(), msg_size))
      throw BenchError("server closed the connection instead of echoing");
    if (in[0] != flag || in[msg_size - 1] != out[msg_size - 1])
      throw BenchError("echo differs from the message sent");
  };

  const int64_t warmup_end = deadline_after_ms(cfg.warmup_ms);
  for (uint64_t n = 0; n < cfg.max_messages && now_ns() < warmup_end; ++n)
    round_trip(kFlagWarmup);

  std::vector<int64_t> samples_ns;
  samples_ns.reserve(size_t(std::min<uint64_t>(cfg.max_messages, 1u << 20)));
  const CpuTime cpu_before = process_cpu_time();
  const int64_t start = now_ns();
  const int64_t end = start + int64_t{cfg.duration_ms} * 1'000'000;
  int64_t t_after = start;
  while (samples_ns.size() < cfg.max_messages && t_after < end) {
    const int64_t t_before = now_ns();
    round_trip(kFlagMeasure);
    t_after = now_ns();
    samples_ns.push_back(t_after - t_before);
  }
  r->client_cpu = process_cpu_time() - cpu_before;
  r->elapsed_ns = t_after - start;

  out[0] = kFlagEnd;  // not echoed: the server answers with its report
  send_all(fd, out.data(), msg_size);
  ServerReport report = recv_report(fd);

  r->messages = r->client_messages = samples_ns.size();
  r->bytes = r->messages * msg_size * 2;
  r->has_latency = true;
  r->latency = summarize_latency(samples_ns);
  r->server_cpu = report.cpu;
  r->server_messages = report.messages;
}

// Sends msg[0, len) from its registration (--zerocopy); retries after EINTR
// and short sends as send_all does.
void send_registered_all(int fd, vsocket_region* region, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = vsocket_send_registered(fd, region, done, len - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("vsocket_send_registered");
    }
    done += size_t(n);
  }
}

void measure_stream(int fd, const ClientConfig& cfg, size_t msg_size,
                    PointResult* r) {
  std::vector<uint8_t> msg = make_message(msg_size);
  // --zerocopy: msg is registered once; each call returns when the buffer
  // may change again, so the flag byte can be rewritten between phases.
  vsocket_region* region = nullptr;
  if (cfg.zerocopy && !KernelSockets()) {  // the kernel row sends plainly
    region = vsocket_register(msg.data(), msg.size());
    if (region == nullptr) throw_errno("vsocket_register");
  }
  struct Deregister {
    vsocket_region* r;
    ~Deregister() { if (r) vsocket_deregister(r); }
  } deregister{region};
  auto send_msg = [&] {
    if (region) send_registered_all(fd, region, msg_size);
    else send_all(fd, msg.data(), msg_size);
  };
  // Read the clock about every 64 KiB sent, not on every tiny message.
  const uint64_t messages_per_clock_read =
      std::max<uint64_t>(1, (64 * 1024) / msg_size);
  auto send_for = [&](uint8_t flag, int ms) {
    msg[0] = flag;
    const int64_t end = deadline_after_ms(ms);
    uint64_t sent = 0, until_clock_read = messages_per_clock_read;
    while (sent < cfg.max_messages) {
      send_msg();
      ++sent;
      if (--until_clock_read == 0) {
        if (now_ns() >= end) break;
        until_clock_read = messages_per_clock_read;
      }
    }
    return sent;
  };

  send_for(kFlagWarmup, cfg.warmup_ms);
  const CpuTime cpu_before = process_cpu_time();
  uint64_t sent = send_for(kFlagMeasure, cfg.duration_ms);
  msg[0] = kFlagEnd;
  send_msg();
  ++sent;
  r->client_cpu = process_cpu_time() - cpu_before;
  r->client_messages = sent;

  ServerReport report = recv_report(fd);
  if (report.bytes == 0 || report.elapsed_ns <= 0)
    throw BenchError("measured window too short: raise --duration-ms");
  // The receiver's count and clock define the throughput.
  r->messages = r->server_messages = report.messages;
  r->bytes = report.bytes;
  r->elapsed_ns = report.elapsed_ns;
  r->server_cpu = report.cpu;
}

// How long one short connection took to get going (now_ns() deltas).
struct ShortConnectionTimes {
  int64_t connect_call_ns = 0;  // the connect() call
  int64_t first_byte_ns = 0;    // before connect() to the echo in hand
};

// One short connection: connect, send a byte, read the echo, close.
ShortConnectionTimes one_short_connection(const ClientConfig& cfg) {
  ShortConnectionTimes times;
  const int64_t t_start = now_ns();
  int fd = connect_to(cfg.server, cfg.io_timeout_ms);
  times.connect_call_ns = now_ns() - t_start;
  try {
    std::string mismatch = transport_mismatch(fd, cfg.transport);
    if (!mismatch.empty())
      throw BenchError("a short connection fell back: " + mismatch);
    uint8_t byte = 'c';
    send_all(fd, &byte, 1);
    if (!recv_all(fd, &byte, 1))
      throw BenchError("server closed a short connection without echoing");
    times.first_byte_ns = now_ns() - t_start;
  } catch (...) {
    Sock().close(fd);
    throw;
  }
  Sock().close(fd);
  return times;
}

void measure_connect(int control_fd, const ClientConfig& cfg, PointResult* r) {
  const int64_t warmup_end = deadline_after_ms(cfg.warmup_ms);
  for (uint64_t n = 0; n < cfg.max_messages && now_ns() < warmup_end; ++n)
    one_short_connection(cfg);

  const uint8_t measure = kFlagMeasure;
  send_all(control_fd, &measure, 1);
  std::vector<int64_t> connect_calls_ns, first_bytes_ns;
  const size_t expected = size_t(std::min<uint64_t>(cfg.max_messages, 1u << 20));
  connect_calls_ns.reserve(expected);
  first_bytes_ns.reserve(expected);
  const CpuTime cpu_before = process_cpu_time();
  const int64_t start = now_ns();
  const int64_t end = start + int64_t{cfg.duration_ms} * 1'000'000;
  uint64_t made = 0;
  int64_t t = start;
  while (made < cfg.max_messages && t < end) {
    ShortConnectionTimes times = one_short_connection(cfg);
    connect_calls_ns.push_back(times.connect_call_ns);
    first_bytes_ns.push_back(times.first_byte_ns);
    ++made;
    t = now_ns();
  }
  r->client_cpu = process_cpu_time() - cpu_before;
  if (made > 0) {
    r->has_latency = r->has_connect_call = true;
    r->latency = summarize_latency(first_bytes_ns);
    r->connect_call = summarize_latency(connect_calls_ns);
  }
  r->elapsed_ns = t - start;

  const uint8_t done = kFlagEnd;
  send_all(control_fd, &done, 1);
  ServerReport report = recv_report(control_fd);
  r->messages = r->client_messages = made;
  r->bytes = made * 2;
  r->server_cpu = report.cpu;
  r->server_messages = report.messages;
}

}  // namespace

PointResult run_point(const ClientConfig& cfg, Mode mode, uint64_t msg_size) {
  PointResult r;
  set_text(r.transport, cfg.transport);
  r.mode = mode;
  r.msg_size = msg_size;
  int fd = -1;
  try {
    fd = connect_to(cfg.server, cfg.io_timeout_ms);
    set_text(r.actual_transport, transport_of(fd));
    std::string mismatch = transport_mismatch(fd, cfg.transport);
    if (!mismatch.empty()) {
      r.status = Status::kSkipped;
      set_text(r.reason, mismatch);
      close_quietly(fd);  // the server sees EOF before a request
      return r;
    }
    set_nodelay(fd);
    send_request(fd, {mode, msg_size, uint32_t(cfg.io_timeout_ms), cfg.transport});
    Ack ack = recv_ack(fd);
    if (!ack.accepted) throw BenchError("server rejected the point: " + ack.message);
    switch (mode) {
      case Mode::kPingPong: measure_pingpong(fd, cfg, msg_size, &r); break;
      case Mode::kStream: measure_stream(fd, cfg, msg_size, &r); break;
      case Mode::kConnect: measure_connect(fd, cfg, &r); break;
    }
  } catch (const TransportUnavailable& e) {
    r.status = Status::kSkipped;
    set_text(r.reason, "library refused VSOCKET_TRANSPORT=" + cfg.transport +
                           " (" + e.what() + ")");
  } catch (const BenchError& e) {
    r.status = Status::kError;
    set_text(r.reason, e.what());
  } catch (const std::exception& e) {  // e.g. std::bad_alloc
    r.status = Status::kError;
    set_text(r.reason, std::string("unexpected: ") + e.what());
  }
  close_quietly(fd);
  return r;
}

}  // namespace vbench
