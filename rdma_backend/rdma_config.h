// The RDMA backend's own settings, read once from VSOCKET_RDMA_* variables
// at first use (the core's vsocket/config.h knows no fabric).  Immutable
// afterwards; any thread.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_CONFIG_H_
#define VSOCKET_RDMA_BACKEND_RDMA_CONFIG_H_

#include <cstdint>

namespace vsocket::rdma {

struct RdmaConfig {
  // How long a client waits for the peer's RDMA CM before it uses TCP.
  uint32_t probe_ms = 300;                // VSOCKET_RDMA_PROBE_MS
  uint64_t ring_bytes = 1ull << 20;       // VSOCKET_RDMA_RING_SIZE (per direction)
  // The process's limit on registered connection memory.
  uint64_t max_registered_mb = 256;       // VSOCKET_RDMA_MAX_REGISTERED_MB
  // How long a negative probe answer is remembered per destination.
  uint32_t negative_ttl_ms = 30000;       // VSOCKET_RDMA_NEGATIVE_TTL_MS
  // The most bytes a burst of small sends holds unposted
  // (rdma_channel.h, "Corking"); 0 posts every send at once.
  uint32_t cork_bytes = 16 * 1024;        // VSOCKET_RDMA_CORK
  // Sockets share one link per pair of peer processes (rdma_backend/
  // README.md "Links") instead of a QP per connection; 0: a QP, CM id and
  // registration per connection (PROTOCOL.md 6.1).
  bool links = true;                      // VSOCKET_RDMA_LINKS (0/1)
  uint8_t qps_per_link = 1;               // VSOCKET_RDMA_QPS_PER_LINK (1..4)
};

const RdmaConfig& GetRdmaConfig();

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_CONFIG_H_
