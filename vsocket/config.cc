#include "vsocket/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>


namespace vsocket {

bool ParseConfigSize(const char* text, uint64_t* out) {
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

void WarnConfigValue(const char* name, const char* value, const char* kept) {
  std::fprintf(stderr, "vsocket: ignoring %s=%s (%s)\n", name, value, kept);
}

namespace {

Config Load() {
  Config config;
  if (const char* v = std::getenv("VSOCKET_TRANSPORT")) {
    if (!std::strcmp(v, "auto") || !*v) {
      config.policy = TransportPolicy::kAuto;
    } else if (!std::strcmp(v, "tcp")) {
      config.policy = TransportPolicy::kTcp;
    } else if (std::strlen(v) < 32) {
      // A provider's name; path selection checks that it exists.
      config.policy = TransportPolicy::kNamed;
      config.transport = v;
    } else {
      WarnConfigValue("VSOCKET_TRANSPORT", v, "expected auto, tcp or a transport's name; using auto");
    }
  }
  if (const char* v = std::getenv("VSOCKET_RING_SIZE")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) && IsValidRingBytes(bytes)) {
      config.ring_bytes = bytes;
    } else {
      WarnConfigValue("VSOCKET_RING_SIZE", v, "expected a power of two from 4K to 1G");
    }
  }
  if (const char* v = std::getenv("VSOCKET_SPIN_US")) {
    uint64_t us = 0;
    if (ParseConfigSize(v, &us) && us <= 1000000) config.spin_us = static_cast<uint32_t>(us);
    else WarnConfigValue("VSOCKET_SPIN_US", v, "expected 0..1000000");
  }
  if (const char* v = std::getenv("VSOCKET_LOG")) {
    if (!std::strcmp(v, "error")) config.log_level = LogLevel::kError;
    else if (!std::strcmp(v, "warn")) config.log_level = LogLevel::kWarn;
    else if (!std::strcmp(v, "info")) config.log_level = LogLevel::kInfo;
    else if (!std::strcmp(v, "debug")) config.log_level = LogLevel::kDebug;
    else WarnConfigValue("VSOCKET_LOG", v, "expected error, warn, info or debug");
  }
  if (const char* v = std::getenv("VSOCKET_STATS")) {
    config.print_stats = *v && std::strcmp(v, "0") != 0;
  }
  if (const char* v = std::getenv("VSOCKET_STDIO")) {
    if (!std::strcmp(v, "tcp")) config.stdio_on_tcp = true;
    else if (!std::strcmp(v, "keep")) config.stdio_on_tcp = false;
    else WarnConfigValue("VSOCKET_STDIO", v, "expected tcp or keep; using tcp");
  }
  if (const char* v = std::getenv("VSOCKET_FD_SHARE")) {
    uint64_t percent = 0;
    if (ParseConfigSize(v, &percent) && percent <= 90) config.fd_share_percent = static_cast<uint32_t>(percent);
    else WarnConfigValue("VSOCKET_FD_SHARE", v, "expected a percentage 0..90");
  }
  if (const char* v = std::getenv("VSOCKET_MAX_SHM_CONNECTIONS")) {
    uint64_t n = 0;
    if (ParseConfigSize(v, &n) && n <= (1u << 24)) config.max_shm_connections = static_cast<uint32_t>(n);
    else WarnConfigValue("VSOCKET_MAX_SHM_CONNECTIONS", v, "expected 0..16777216");
  }
  if (const char* v = std::getenv("VSOCKET_CLAIM_TIMEOUT_MS")) {
    uint64_t ms = 0;
    if (ParseConfigSize(v, &ms) && ms >= 1 && ms <= 600000) config.claim_timeout_ms = static_cast<uint32_t>(ms);
    else WarnConfigValue("VSOCKET_CLAIM_TIMEOUT_MS", v, "expected 1..600000");
  }
  return config;
}

}  // namespace

const Config& GetConfig() {
  static const Config config = Load();
  return config;
}

}  // namespace vsocket
