#include "rdma_backend/rdma_config.h"

#include <cstdlib>

#include "vsocket/config.h"

namespace vsocket::rdma {
namespace {

RdmaConfig Load() {
  RdmaConfig config;
  if (const char* v = std::getenv("VSOCKET_RDMA_PROBE_MS")) {
    uint64_t ms = 0;
    if (ParseConfigSize(v, &ms) && ms >= 1 && ms <= 60000) config.probe_ms = static_cast<uint32_t>(ms);
    else WarnConfigValue("VSOCKET_RDMA_PROBE_MS", v, "expected 1..60000");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_RING_SIZE")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) && IsValidRingBytes(bytes) && bytes <= (64ull << 20)) {
      config.ring_bytes = bytes;
    } else {
      WarnConfigValue("VSOCKET_RDMA_RING_SIZE", v, "expected a power of two from 4K to 64M");
    }
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_MAX_REGISTERED_MB")) {
    uint64_t mb = 0;
    if (ParseConfigSize(v, &mb) && mb >= 1 && mb <= (1u << 20)) config.max_registered_mb = mb;
    else WarnConfigValue("VSOCKET_RDMA_MAX_REGISTERED_MB", v, "expected 1..1048576");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_NEGATIVE_TTL_MS")) {
    uint64_t ms = 0;
    if (ParseConfigSize(v, &ms) && ms <= 3600000) config.negative_ttl_ms = static_cast<uint32_t>(ms);
    else WarnConfigValue("VSOCKET_RDMA_NEGATIVE_TTL_MS", v, "expected 0..3600000");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_CORK")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) && bytes <= (1u << 20)) config.cork_bytes = static_cast<uint32_t>(bytes);
    else WarnConfigValue("VSOCKET_RDMA_CORK", v, "expected 0..1M bytes");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_LINKS")) {
    if (v[0] != '\0' && v[1] == '\0' && (v[0] == '0' || v[0] == '1')) config.links = v[0] == '1';
    else WarnConfigValue("VSOCKET_RDMA_LINKS", v, "expected 0 or 1");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_QPS_PER_LINK")) {
    uint64_t n = 0;
    if (ParseConfigSize(v, &n) && n >= 1 && n <= 4) config.qps_per_link = static_cast<uint8_t>(n);
    else WarnConfigValue("VSOCKET_RDMA_QPS_PER_LINK", v, "expected 1..4");
  }
  return config;
}

}  // namespace

const RdmaConfig& GetRdmaConfig() {
  static const RdmaConfig config = Load();
  return config;
}

}  // namespace vsocket::rdma
