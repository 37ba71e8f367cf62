// The benchmark's own wire protocol between client and server.
//
// One session per measurement point, on one connection:
//   client -> server  Request   (mode, message size, timings)
//   server -> client  Ack       (accepted, or rejected with a message)
//   ... mode traffic ...
//   server -> client  ServerReport (the server's counts and CPU time)
//
// pingpong/stream: every data message is msg_size bytes whose first byte is
// a MessageFlag. The server starts its measured window at the first kMeasure
// message. After a kEnd message the server sends its ServerReport instead of
// (pingpong) an echo. In stream mode the kEnd message is counted.
// connect: the session connection carries one control byte, kMeasure when
// the client's warm-up is over and kEnd when it is done; meanwhile the client
// makes short connections to the same listening port, each of which the
// server accepts, echoes one byte on, and closes.
//
// Integers are big-endian so client and server may run on different hosts.
#ifndef VSOCKET_BENCHMARKS_BENCH_PROTOCOL_H_
#define VSOCKET_BENCHMARKS_BENCH_PROTOCOL_H_

#include <cstdint>
#include <string>

#include "bench_clock.h"
#include "bench_result.h"

namespace vbench {

enum MessageFlag : uint8_t {
  kFlagWarmup = 'W',
  kFlagMeasure = 'M',
  kFlagEnd = 'E',
};

// The largest message a server agrees to handle.
constexpr uint64_t kMaxMessageSize = 64ull << 20;

struct Request {
  Mode mode = Mode::kPingPong;
  uint64_t msg_size = 0;
  uint32_t io_timeout_ms = 0;
  std::string transport;  // informational: what the client asked for
};

struct Ack {
  bool accepted = false;
  std::string message;  // why rejected
};

struct ServerReport {
  uint64_t messages = 0;  // messages (stream/pingpong) or connections served
  uint64_t bytes = 0;     // bytes received in the window (stream)
  int64_t elapsed_ns = 0; // length of the server's measured window
  CpuTime cpu;            // server CPU time over that window
};

// Each send throws BenchError on failure. Each receive returns false on EOF
// before the first byte, and throws BenchError on a malformed message.
void send_request(int fd, const Request& request);
bool recv_request(int fd, Request* request);
void send_ack(int fd, const Ack& ack);
Ack recv_ack(int fd);
void send_report(int fd, const ServerReport& report);
ServerReport recv_report(int fd);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_PROTOCOL_H_
