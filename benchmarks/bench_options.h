// Command line of vsocket-bench.
#ifndef VSOCKET_BENCHMARKS_BENCH_OPTIONS_H_
#define VSOCKET_BENCHMARKS_BENCH_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench_result.h"

namespace vbench {

enum class Role { kLocal, kServer, kClient };

constexpr uint16_t kDefaultPort = 7201;

struct Options {
  Role role = Role::kLocal;
  std::string host;  // --client HOST
  std::string local_address = "127.0.0.1";  // --local: --address IP
  int port = -1;     // -1: kDefaultPort, or an ephemeral port for --local
  std::vector<Mode> modes;            // run order
  std::vector<uint64_t> sizes;        // bytes, for pingpong and stream
  std::vector<std::string> transports;
  int duration_ms = 0;   // measured window per point
  int warmup_ms = 0;     // unmeasured traffic before each point
  int io_timeout_ms = 0; // bound on any single blocked socket call
  uint64_t max_messages = 0;  // cap per phase of a point
  int idle_exit_ms = 0;  // --server: exit after this long idle (0 = never)
  std::string json_path;
  std::string svg_path;
  bool verbose = false;
  // stream: the sender uses vsocket_send_registered from a registered
  // buffer and the receiver vsocket_recv_inplace / vsocket_recv_release.
  bool zerocopy = false;
  // --local: VSOCKET_TRANSPORT of one end instead of the transport under
  // test, which then runs on the other end only (e.g. a plain "tcp" peer).
  std::string server_transport;
  std::string client_transport;
  // stream: the receiver (server) asks for at most this many bytes per
  // recv (0: 256 KiB or the message size, a bulk receiver).
  uint64_t recv_size = 0;
};

extern const char kUsage[];

// Parses argv into *options with defaults filled in. On a usage error
// returns false with *error set; on --help returns false with *error empty.
bool parse_options(int argc, char** argv, Options* options, std::string* error);

// Parses "64", "4K", "1M" (K/M/G = KiB/MiB/GiB). False if malformed or 0.
bool parse_size(const std::string& text, uint64_t* bytes);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_OPTIONS_H_
