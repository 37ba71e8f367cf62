// Process-wide configuration, read once from VSOCKET_* environment variables
// at first use.  Immutable afterwards; safe to read from any thread.
#ifndef VSOCKET_VSOCKET_CONFIG_H_
#define VSOCKET_VSOCKET_CONFIG_H_

#include <cstdint>

namespace vsocket {

enum class TransportPolicy {
  kAuto,  // fastest path both ends support; kernel TCP otherwise
  kShm,   // shared memory where possible, else TCP (never RDMA)
  kTcp,   // always kernel TCP (reason: disabled_by_config)
  kRdma,  // RDMA where possible, even to this host (never shm), else TCP
};

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct Config {
  TransportPolicy policy = TransportPolicy::kAuto;  // VSOCKET_TRANSPORT
  uint64_t ring_bytes = 1ull << 20;     // VSOCKET_RING_SIZE (per direction)
  // Must exceed the time a sleeping peer takes to wake up (25-100 us on a
  // small VM), or a ping-pong that once fell asleep keeps sleeping.
  uint32_t spin_us = 200;               // VSOCKET_SPIN_US
  LogLevel log_level = LogLevel::kWarn; // VSOCKET_LOG
  bool print_stats = false;             // VSOCKET_STATS
  uint32_t claim_timeout_ms = 3000;     // VSOCKET_CLAIM_TIMEOUT_MS
  // RDMA (rdma_backend/): how long a client waits for the peer's RDMA CM
  // before it uses TCP, per-direction ring size, the process's limit on
  // registered connection memory, and how long a negative probe answer is
  // remembered per destination.
  uint32_t rdma_probe_ms = 300;              // VSOCKET_RDMA_PROBE_MS
  uint64_t rdma_ring_bytes = 1ull << 20;     // VSOCKET_RDMA_RING_SIZE
  uint64_t rdma_max_registered_mb = 256;     // VSOCKET_RDMA_MAX_REGISTERED_MB
  uint32_t rdma_negative_ttl_ms = 30000;     // VSOCKET_RDMA_NEGATIVE_TTL_MS
};

// The configuration of this process.
const Config& GetConfig();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_CONFIG_H_
