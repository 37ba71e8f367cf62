// Process-wide configuration, read once from VSOCKET_* environment variables
// at first use.  Immutable afterwards; safe to read from any thread.
#ifndef VSOCKET_VSOCKET_CONFIG_H_
#define VSOCKET_VSOCKET_CONFIG_H_

#include <cstdint>
#include <string>

namespace vsocket {

// VSOCKET_TRANSPORT: "auto" (every registered provider, in priority
// order), "tcp" (none), or a provider's name ("shm", "rdma": that provider
// alone, which may then go where it otherwise would not).
enum class TransportPolicy {
  kAuto,   // fastest path both ends support; kernel TCP otherwise
  kTcp,    // always kernel TCP (reason: disabled_by_config)
  kNamed,  // only the provider named in Config::transport, else TCP
};

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct Config {
  TransportPolicy policy = TransportPolicy::kAuto;  // VSOCKET_TRANSPORT
  uint64_t ring_bytes = 1ull << 20;     // VSOCKET_RING_SIZE (per direction)
  // Must exceed the time a sleeping peer takes to wake up (25-100 us on a
  // small VM), or a ping-pong that once fell asleep keeps sleeping. Unset,
  // GetConfig takes DefaultSpinUs(online CPUs): 0 on one CPU.
  uint32_t spin_us = 200;               // VSOCKET_SPIN_US
  bool spin_us_named = false;           // VSOCKET_SPIN_US set to a valid value
  LogLevel log_level = LogLevel::kWarn; // VSOCKET_LOG
  bool print_stats = false;             // VSOCKET_STATS
  std::string transport;                // the name, for kNamed
  // How long an offer may stay unclaimed before the client gives up and
  // uses TCP (and a server drops a parked, unclaimed handshake).
  uint32_t claim_timeout_ms = 3000;     // VSOCKET_CLAIM_TIMEOUT_MS
  // A connection placed on descriptor 0, 1 or 2, given to fdopen(), or
  // inherited there by an exec'd image moves to kernel TCP, because glibc's
  // stdio reads and writes behind the interposer (reason
  // stdio_descriptor).  false ("keep") leaves it on its transport: for
  // inetd-style programs known to use read(2)/write(2) only.
  bool stdio_on_tcp = true;             // VSOCKET_STDIO=tcp|keep
  // A client connection that moved data in fewer calls than this is
  // short; after a few in a row to one destination, new ones to it stay on
  // kernel TCP (short_lived; vsocket/connection_history.h).  0: never;
  // at most 1024.
  uint32_t short_calls = 16;            // VSOCKET_SHORT_CALLS
  // Threads of a process that may busy-poll in the interposed waits at
  // once (vsocket/poller_slots.h); 0: half the online CPUs, at least 1.
  uint32_t spin_threads = 0;            // VSOCKET_SPIN_THREADS
  // Publish the live statistics page that vsocket-stat reads
  // (vsocket/live_stats.h); false keeps the counters in private memory.
  bool live_stats = true;               // VSOCKET_LIVE_STATS=0|1
  // The rules file (vsocket/rules.h): per program, role and address, the
  // transport policy and ring size.  "" (VSOCKET_CONFIG set empty): none.
  std::string rules_file = "/etc/vsocket.conf";  // VSOCKET_CONFIG
  // true when VSOCKET_CONFIG named the file (a missing default is silent).
  bool rules_file_named = false;
};

// The configuration of this process: ParseConfig of its environment, with
// the spin budget's default for this machine.
const Config& GetConfig();

// VSOCKET_SPIN_US's default on a machine with `online_cpus` CPUs online: 0
// with one (or an unknown count, < 1), where what a spin waits for (the peer
// process, the kernel's work for a software RDMA device such as rxe) cannot
// run while the spinning thread holds the only CPU; otherwise 200.
uint32_t DefaultSpinUs(long online_cpus);

// The program's short name (program_invocation_short_name) as it was when
// the library was loaded, before main(): programs that rewrite their argv
// for ps (redis-server, nginx) change it later.  What rules match and what
// vsocket-stat shows.
const char* ProgramName();

// Where ParseConfig reads a variable: its value, or nullptr when unset.
using ConfigLookup = const char* (*)(const char* name, void* context);
// The configuration the VSOCKET_* values `lookup` gives would make (what
// GetConfig does once with getenv).  Pure apart from WarnConfigValue's
// lines; every field it returns is within its documented range.
Config ParseConfig(ConfigLookup lookup, void* context);

// For providers that read VSOCKET_* variables of their own, once, in the
// same way (each keeps its settings in its own folder).
// Parses "123", "64K", "1M", "1G" (binary units); false on junk: a sign,
// blanks, other suffixes, or a value that does not fit 64 bits.
bool ParseConfigSize(const char* text, uint64_t* out);
// One line on stderr: the variable is ignored, and what is used instead.
void WarnConfigValue(const char* name, const char* value, const char* kept);
// The ring-size rule every ring of every transport follows: a power of two
// from 4 KiB to 1 GiB.
inline constexpr bool IsValidRingBytes(uint64_t bytes) {
  return bytes >= 4096 && bytes <= (1ull << 30) && (bytes & (bytes - 1)) == 0;
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_CONFIG_H_
