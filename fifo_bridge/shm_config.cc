#include "fifo_bridge/shm_config.h"

#include <cstdlib>

namespace vsocket::fifo {

ShmConfig ParseShmConfig(ConfigLookup lookup, void* context) {
  ShmConfig config;
  if (const char* v = lookup("VSOCKET_FD_SHARE", context)) {
    uint64_t percent = 0;
    if (ParseConfigSize(v, &percent) && percent <= 90) config.fd_share_percent = static_cast<uint32_t>(percent);
    else WarnConfigValue("VSOCKET_FD_SHARE", v, "expected a percentage 0..90");
  }
  if (const char* v = lookup("VSOCKET_MAX_SHM_CONNECTIONS", context)) {
    uint64_t n = 0;
    if (ParseConfigSize(v, &n) && n <= (1u << 24)) config.max_shm_connections = static_cast<uint32_t>(n);
    else WarnConfigValue("VSOCKET_MAX_SHM_CONNECTIONS", v, "expected 0..16777216");
  }
  if (const char* v = lookup("VSOCKET_SHM_POOL", context)) {
    if (v[0] != '\0' && (v[0] == '0' || v[0] == '1') && v[1] == '\0') config.pool = v[0] == '1';
    else WarnConfigValue("VSOCKET_SHM_POOL", v, "expected 0 or 1");
  }
  return config;
}

const ShmConfig& GetShmConfig() {
  static const ShmConfig config = ParseShmConfig(
      [](const char* name, void*) -> const char* { return std::getenv(name); }, nullptr);
  return config;
}

}  // namespace vsocket::fifo
