// Shared memory's own settings, read once from VSOCKET_* variables (the
// core's vsocket/config.h knows no fabric).  Immutable afterwards; any
// thread.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_CONFIG_H_
#define VSOCKET_FIFO_BRIDGE_SHM_CONFIG_H_

#include <cstdint>

#include "vsocket/config.h"

namespace vsocket::fifo {

struct ShmConfig {
  // When vsocket's own descriptors must come out of the application's
  // RLIMIT_NOFILE (its hard limit equals the soft one), the percentage of
  // that limit they may take (descriptor_budget.h).  At most 90.
  uint32_t fd_share_percent = 12;       // VSOCKET_FD_SHARE
  // Shared-memory connections this process may hold at once (0: no cap
  // but the descriptors'); past it, kernel TCP (connection_limit).  At
  // most 2^24.
  uint32_t max_shm_connections = 0;     // VSOCKET_MAX_SHM_CONNECTIONS
  // Named offers are slices of one pool per client process (shm_pool.h)
  // rather than a file each (0: a file each, as before issue 33).  Servers
  // take both kinds whatever it says.
  bool pool = true;                     // VSOCKET_SHM_POOL=0|1
};

// The settings the VSOCKET_* values `lookup` gives would make; a value out
// of range is warned about (WarnConfigValue) and the default kept.
ShmConfig ParseShmConfig(ConfigLookup lookup, void* context);

// This process's, from the environment at first call (the provider's
// registration, while the environment is still the one the user gave).
const ShmConfig& GetShmConfig();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_CONFIG_H_
