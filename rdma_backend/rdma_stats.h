// Registered-memory counters of the RDMA backend, reported as the
// "rdma_registered" section of VSOCKET_STATS (vsocket/stats.h):
//   "rdma_registered":{"bytes":0,"peak_bytes":4202496,
//    "max_per_connection_bytes":2097152,"limit_bytes":268435456,
//    "user_region_bytes":67108864,"links":1,"link_qps":1}
// Lock-free (relaxed atomics); any thread.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_STATS_H_
#define VSOCKET_RDMA_BACKEND_RDMA_STATS_H_

#include <cstdint>

namespace vsocket::rdma {

// `delta` bytes were registered (> 0) or released (< 0) by a connection
// that holds `connection_bytes` in total.
void StatsRdmaRegistered(int64_t delta, uint64_t connection_bytes);
uint64_t StatsRdmaRegisteredBytes();
// Bytes of application buffers (vsocket_register) registered on RDMA
// devices now, once per device that used them: user_region_bytes, not
// counted in "bytes" (which VSOCKET_RDMA_MAX_REGISTERED_MB limits).
void StatsRdmaUserRegion(int64_t delta);
// Links live now and their QPs (rdma_backend/README.md "Links"): "links"
// and "link_qps" in the same section.
void StatsRdmaLinks(int links_delta, int qps_delta);

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_STATS_H_
