#include "vsocket/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fifo_bridge/ring_layout.h"

namespace vsocket {
namespace {

// Parses "123", "64K", "1M", "1G" (binary units).  Returns false on junk.
bool ParseSize(const char* text, uint64_t* out) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text) return false;
  switch (*end) {
    case 'k': case 'K': value <<= 10; ++end; break;
    case 'm': case 'M': value <<= 20; ++end; break;
    case 'g': case 'G': value <<= 30; ++end; break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = value;
  return true;
}

void Warn(const char* name, const char* value, const char* kept) {
  std::fprintf(stderr, "vsocket: ignoring %s=%s (%s)\n", name, value, kept);
}

Config Load() {
  Config config;
  if (const char* v = std::getenv("VSOCKET_TRANSPORT")) {
    if (!std::strcmp(v, "auto") || !*v) config.policy = TransportPolicy::kAuto;
    else if (!std::strcmp(v, "shm")) config.policy = TransportPolicy::kShm;
    else if (!std::strcmp(v, "tcp")) config.policy = TransportPolicy::kTcp;
    else if (!std::strcmp(v, "rdma")) config.policy = TransportPolicy::kRdma;
    else Warn("VSOCKET_TRANSPORT", v, "expected auto, shm, rdma or tcp; using auto");
  }
  if (const char* v = std::getenv("VSOCKET_RING_SIZE")) {
    uint64_t bytes = 0;
    if (ParseSize(v, &bytes) && fifo::IsValidCapacity(bytes)) {
      config.ring_bytes = bytes;
    } else {
      Warn("VSOCKET_RING_SIZE", v, "expected a power of two from 4K to 1G");
    }
  }
  if (const char* v = std::getenv("VSOCKET_SPIN_US")) {
    uint64_t us = 0;
    if (ParseSize(v, &us) && us <= 1000000) config.spin_us = static_cast<uint32_t>(us);
    else Warn("VSOCKET_SPIN_US", v, "expected 0..1000000");
  }
  if (const char* v = std::getenv("VSOCKET_LOG")) {
    if (!std::strcmp(v, "error")) config.log_level = LogLevel::kError;
    else if (!std::strcmp(v, "warn")) config.log_level = LogLevel::kWarn;
    else if (!std::strcmp(v, "info")) config.log_level = LogLevel::kInfo;
    else if (!std::strcmp(v, "debug")) config.log_level = LogLevel::kDebug;
    else Warn("VSOCKET_LOG", v, "expected error, warn, info or debug");
  }
  if (const char* v = std::getenv("VSOCKET_STATS")) {
    config.print_stats = *v && std::strcmp(v, "0") != 0;
  }
  if (const char* v = std::getenv("VSOCKET_CLAIM_TIMEOUT_MS")) {
    uint64_t ms = 0;
    if (ParseSize(v, &ms) && ms >= 1 && ms <= 600000) config.claim_timeout_ms = static_cast<uint32_t>(ms);
    else Warn("VSOCKET_CLAIM_TIMEOUT_MS", v, "expected 1..600000");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_PROBE_MS")) {
    uint64_t ms = 0;
    if (ParseSize(v, &ms) && ms >= 1 && ms <= 60000) config.rdma_probe_ms = static_cast<uint32_t>(ms);
    else Warn("VSOCKET_RDMA_PROBE_MS", v, "expected 1..60000");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_RING_SIZE")) {
    uint64_t bytes = 0;
    if (ParseSize(v, &bytes) && fifo::IsValidCapacity(bytes) && bytes <= (64ull << 20)) {
      config.rdma_ring_bytes = bytes;
    } else {
      Warn("VSOCKET_RDMA_RING_SIZE", v, "expected a power of two from 4K to 64M");
    }
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_MAX_REGISTERED_MB")) {
    uint64_t mb = 0;
    if (ParseSize(v, &mb) && mb >= 1 && mb <= (1u << 20)) config.rdma_max_registered_mb = mb;
    else Warn("VSOCKET_RDMA_MAX_REGISTERED_MB", v, "expected 1..1048576");
  }
  if (const char* v = std::getenv("VSOCKET_RDMA_NEGATIVE_TTL_MS")) {
    uint64_t ms = 0;
    if (ParseSize(v, &ms) && ms <= 3600000) config.rdma_negative_ttl_ms = static_cast<uint32_t>(ms);
    else Warn("VSOCKET_RDMA_NEGATIVE_TTL_MS", v, "expected 0..3600000");
  }
  return config;
}

}  // namespace

const Config& GetConfig() {
  static const Config config = Load();
  return config;
}

}  // namespace vsocket
