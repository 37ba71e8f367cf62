#include "bench_options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "bench_protocol.h"

namespace vbench {

const char kUsage[] =
    "usage:\n"
    "  vsocket-bench --local  [options]          both ends on this machine\n"
    "  vsocket-bench --server [--port P] [--idle-exit-ms MS] [--verbose]\n"
    "  vsocket-bench --client HOST [--port P] [options]\n"
    "\n"
    "options:\n"
    "  --mode M            pingpong, stream, connect or all; a comma list is\n"
    "                      accepted (default all)\n"
    "  --sizes LIST        message sizes, e.g. 64,1K,64K,1M (K/M = KiB/MiB)\n"
    "                      (default 64,1024,65536,1048576)\n"
    "  --sweep             sizes 64 B .. 4 MiB in powers of 4\n"
    "  --transports LIST   VSOCKET_TRANSPORT values to compare, in order\n"
    "                      (default tcp,shm; also auto, toe, rdma (where a\n"
    "                      device exists)); tcp, the baseline, is kernel TCP\n"
    "                      on plain system calls, without vsocket\n"
    "  --server-transport T, --client-transport T\n"
    "                      --local: that end runs VSOCKET_TRANSPORT=T instead\n"
    "                      of the transport under test, which then runs on the\n"
    "                      other end only (T=tcp: a peer on plain system calls)\n"
    "  --recv-size N       stream: the receiver reads at most N bytes per call\n"
    "                      (default 256K: a bulk receiver); small values model\n"
    "                      programs that parse as they read\n"
    "  --duration-ms MS    measured time per point (default 300 with --local,\n"
    "                      1000 with --client)\n"
    "  --warmup-ms MS      unmeasured traffic before each point (default 100)\n"
    "  --max-messages N    cap on messages per phase of a point (default 10000000)\n"
    "  --io-timeout-ms MS  longest any socket call may block (default 5000)\n"
    "  --port P            server port (default 7201; --local: ephemeral)\n"
    "  --address IP        --local: the address both ends use (default\n"
    "                      127.0.0.1; RDMA needs an address of the RDMA\n"
    "                      device's interface, e.g. the host's own IP)\n"
    "  --json FILE         write results as JSON\n"
    "  --plot FILE.svg     write latency, throughput and CPU-per-message plots\n"
    "                      as SVG\n"
    "  --verbose           progress and server session logs on stderr\n"
    "  --zerocopy          stream mode through the zero-copy calls: the sender\n"
    "                      sends from a registered buffer (vsocket_register +\n"
    "                      vsocket_send_registered), the receiver reads in place\n"
    "                      (vsocket_recv_inplace / vsocket_recv_release); give it\n"
    "                      to --server too\n"
    "  --help              this text\n"
    "\n"
    "The server runs with its own VSOCKET_TRANSPORT (default auto); with\n"
    "--local each transport gets a fresh server and client process.\n"
    "VSOCKET_SPIN_US is passed through to both ends unchanged.\n";

bool parse_size(const std::string& text, uint64_t* bytes) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  std::string suffix(end);
  uint64_t unit = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") unit = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") unit = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") unit = 1ull << 30;
  else if (!suffix.empty() && suffix != "B") return false;
  if (value == 0 || value > UINT64_MAX / unit) return false;
  *bytes = value * unit;
  return true;
}

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ','))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// Parses a whole decimal number in [min, max].
bool parse_int(const std::string& text, long long min, long long max, long long* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) return false;
  *out = value;
  return true;
}

}  // namespace

bool parse_options(int argc, char** argv, Options* o, std::string* error) {
  bool role_given = false, sizes_given = false;
  std::string modes_text = "all", transports_text = "tcp,shm";
  long long duration = -1, warmup = 100, io_timeout = 5000, max_messages = 10'000'000;
  long long idle_exit = 0, port = -1;

  auto fail = [&](const std::string& why) {
    *error = why;
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // Returns the option's value, or nullptr if it is missing.
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto set_role = [&](Role role) {
      if (role_given) return false;
      role_given = true;
      o->role = role;
      return true;
    };
    auto number = [&](long long min, long long max, long long* out) {
      const char* v = value();
      return v != nullptr && parse_int(v, min, max, out);
    };

    if (arg == "--help" || arg == "-h") {
      error->clear();
      return false;
    } else if (arg == "--local") {
      if (!set_role(Role::kLocal)) return fail("give one of --local, --server, --client");
    } else if (arg == "--server") {
      if (!set_role(Role::kServer)) return fail("give one of --local, --server, --client");
    } else if (arg == "--client") {
      const char* host = value();
      if (!host) return fail("--client needs a HOST");
      if (!set_role(Role::kClient)) return fail("give one of --local, --server, --client");
      o->host = host;
    } else if (arg == "--address") {
      const char* v = value();
      if (!v) return fail("--address needs an IPv4 or IPv6 address");
      o->local_address = v;
    } else if (arg == "--port") {
      if (!number(1, 65535, &port)) return fail("--port needs a number in 1..65535");
    } else if (arg == "--mode") {
      const char* v = value();
      if (!v) return fail("--mode needs pingpong|stream|connect|all");
      modes_text = v;
    } else if (arg == "--sizes") {
      const char* v = value();
      if (!v) return fail("--sizes needs a list such as 64,1K,1M");
      o->sizes.clear();
      for (const std::string& part : split_commas(v)) {
        uint64_t bytes;
        if (!parse_size(part, &bytes) || bytes > kMaxMessageSize)
          return fail("bad size '" + part + "' (1 B .. 64 MiB)");
        o->sizes.push_back(bytes);
      }
      sizes_given = true;
    } else if (arg == "--sweep") {
      o->sizes.clear();
      for (uint64_t s = 64; s <= (4ull << 20); s *= 4) o->sizes.push_back(s);
      sizes_given = true;
    } else if (arg == "--transports") {
      const char* v = value();
      if (!v) return fail("--transports needs a list such as tcp,shm");
      transports_text = v;
    } else if (arg == "--duration-ms") {
      if (!number(1, 3'600'000, &duration)) return fail("--duration-ms needs 1..3600000");
    } else if (arg == "--warmup-ms") {
      if (!number(0, 3'600'000, &warmup)) return fail("--warmup-ms needs 0..3600000");
    } else if (arg == "--io-timeout-ms") {
      if (!number(10, 3'600'000, &io_timeout)) return fail("--io-timeout-ms needs 10..3600000");
    } else if (arg == "--max-messages") {
      if (!number(1, 1'000'000'000'000, &max_messages)) return fail("--max-messages needs a positive number");
    } else if (arg == "--idle-exit-ms") {
      if (!number(0, 86'400'000, &idle_exit)) return fail("--idle-exit-ms needs 0..86400000");
    } else if (arg == "--json") {
      const char* v = value();
      if (!v) return fail("--json needs a FILE");
      o->json_path = v;
    } else if (arg == "--plot") {
      const char* v = value();
      if (!v) return fail("--plot needs a FILE.svg");
      o->svg_path = v;
    } else if (arg == "--verbose" || arg == "-v") {
      o->verbose = true;
    } else if (arg == "--zerocopy") {
      o->zerocopy = true;
    } else if (arg == "--server-transport" || arg == "--client-transport") {
      const char* v = value();
      if (!v || !*v || std::strlen(v) >= 16) return fail(arg + " needs a transport name");
      (arg == "--server-transport" ? o->server_transport : o->client_transport) = v;
    } else if (arg == "--recv-size") {
      const char* v = value();
      if (!v || !parse_size(v, &o->recv_size)) return fail("--recv-size needs a size such as 64 or 4K");
    } else {
      return fail("unknown argument '" + arg + "'");
    }
  }

  if (!role_given) return fail("give one of --local, --server or --client HOST");

  o->modes.clear();
  for (const std::string& name : split_commas(modes_text)) {
    if (name == "all") {
      o->modes = {Mode::kPingPong, Mode::kStream, Mode::kConnect};
      continue;
    }
    std::optional<Mode> mode = parse_mode(name);
    if (!mode) return fail("unknown mode '" + name + "'");
    o->modes.push_back(*mode);
  }
  if (o->modes.empty()) return fail("--mode is empty");

  o->transports = split_commas(transports_text);
  if (o->transports.empty()) return fail("--transports is empty");
  for (const std::string& t : o->transports)
    if (t.size() >= 16) return fail("transport name '" + t + "' is too long");

  if (!sizes_given) o->sizes = {64, 1024, 65536, 1048576};
  if (o->sizes.empty()) return fail("--sizes is empty");
  o->port = int(port);
  o->duration_ms = int(duration >= 0 ? duration : o->role == Role::kClient ? 1000 : 300);
  o->warmup_ms = int(warmup);
  o->io_timeout_ms = int(io_timeout);
  o->max_messages = uint64_t(max_messages);
  o->idle_exit_ms = int(idle_exit);
  return true;
}

}  // namespace vbench
