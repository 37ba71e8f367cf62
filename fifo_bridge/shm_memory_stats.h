// The shared memory this process's shared-memory connections hold, for
// VSOCKET_STATS ("shm_memory": bytes now, peak, trims).  Each connection
// accounts for the bytes its own transmit ring has touched (in 64 KiB
// steps, so the data path adds to the process-wide counter once per 64 KiB
// of new ring, never per message) plus its fixed pages, and takes them back
// when its ring is trimmed or the connection is released.  Any thread.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_MEMORY_STATS_H_
#define VSOCKET_FIFO_BRIDGE_SHM_MEMORY_STATS_H_

#include <cstdint>

namespace vsocket::fifo {

void StatsShmMemory(int64_t delta_bytes);
void StatsShmTrim(uint64_t freed_bytes);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_MEMORY_STATS_H_
