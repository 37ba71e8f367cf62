// The client end: measures one point against a running server.
#ifndef VSOCKET_BENCHMARKS_BENCH_CLIENT_H_
#define VSOCKET_BENCHMARKS_BENCH_CLIENT_H_

#include <cstdint>
#include <string>

#include "bench_net.h"
#include "bench_result.h"

namespace vbench {

struct ClientConfig {
  PeerAddress server;
  std::string transport;  // what VSOCKET_TRANSPORT was set to; "auto" accepts any
  int warmup_ms = 100;    // unmeasured traffic before each point
  int duration_ms = 300;  // measured window of each point
  int io_timeout_ms = 5000;
  uint64_t max_messages = 10'000'000;  // per phase, whatever the time
  bool zerocopy = false;  // stream: send with vsocket_send_registered
};

// Must run in a process whose VSOCKET_TRANSPORT is cfg.transport. Never
// throws: a connection on another transport than requested comes back as
// kSkipped with vsocket_fallback_reason(), a library that refuses the
// transport as kSkipped too, any other failure as kError with its message.
PointResult run_point(const ClientConfig& cfg, Mode mode, uint64_t msg_size);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_CLIENT_H_
