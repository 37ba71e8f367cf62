// Process-wide counters: connections and bytes per transport, and a count for
// each fallback reason.  Lock-free (relaxed atomics); callable from any
// thread.  With VSOCKET_STATS=1 the process prints StatsJson() as one line
// to stderr at exit.
//
// JSON shape (stable, documented in README):
//   {"pid":123,"transports":{"shm":{"connections":2,"bytes_sent":10,
//    "bytes_received":10}, "tcp":{...}},"fallback_reasons":{"peer_not_vsocket":1},
//    "rdma_registered":{"bytes":0,"peak_bytes":4202496,
//    "max_per_connection_bytes":2101248,"limit_bytes":268435456,
//    "user_region_bytes":67108864}}
// Transports and reasons with a zero count are left out; rdma_registered only
// appears once an RDMA connection existed, user_region_bytes only while
// registered application buffers are.
#ifndef VSOCKET_VSOCKET_STATS_H_
#define VSOCKET_VSOCKET_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "vsocket/fallback_reason.h"

namespace vsocket {

enum class TransportKind { kTcp = 0, kShm = 1, kRdma = 2, kCount };
const char* TransportKindName(TransportKind kind);

struct TransportCounters;  // opaque

void StatsConnectionOpened(TransportKind kind);
void StatsConnectionMoved(TransportKind from, TransportKind to);
void StatsBytesSent(TransportKind kind, uint64_t bytes);
void StatsBytesReceived(TransportKind kind, uint64_t bytes);
// Counts the reason and logs it once per process at info level.
void StatsFallback(FallbackReason reason, const char* detail);

// RDMA registered memory held by live connections: `delta` bytes were
// registered (> 0) or released (< 0) by a connection that holds
// `connection_bytes` in total.
void StatsRdmaRegistered(int64_t delta, uint64_t connection_bytes);
uint64_t StatsRdmaRegisteredBytes();
// Bytes of application buffers (vsocket_register) registered on RDMA
// devices now, once per device that used them: reported as
// rdma_registered.user_region_bytes, not counted in "bytes" (which the
// VSOCKET_RDMA_MAX_REGISTERED_MB limit applies to).
void StatsRdmaUserRegion(int64_t delta);

std::string StatsJson();

// Registers the at-exit printer if VSOCKET_STATS is set.  Idempotent.
void StatsInstallExitHook();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_STATS_H_
