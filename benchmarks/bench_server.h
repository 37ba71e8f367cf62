// The server end: answers benchmark sessions one at a time.
#ifndef VSOCKET_BENCHMARKS_BENCH_SERVER_H_
#define VSOCKET_BENCHMARKS_BENCH_SERVER_H_

#include <cstddef>

namespace vbench {

struct ServerOptions {
  int stop_fd = -1;        // return once this fd is readable or hung up
  int idle_exit_ms = 0;    // return after this long without a session; 0 = never
  int io_timeout_ms = 5000;  // bound on every blocked call inside a session
  bool verbose = false;    // log each session to stderr
  bool zerocopy = false;   // stream: read with vsocket_recv_inplace
  size_t recv_size = 0;    // stream: bytes asked for per recv; 0: bulk
};

// Accepts and serves sessions on listen_fd (see bench_protocol.h) until a
// stop condition of options holds. A failed session is logged to stderr and
// the server goes on. Throws BenchError only if polling/accepting fails.
void serve(int listen_fd, const ServerOptions& options);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_SERVER_H_
