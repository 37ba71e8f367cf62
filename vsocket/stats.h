// Process-wide counters: connections and bytes per transport, and a count for
// each fallback reason.  Lock-free (relaxed atomics); callable from any
// thread.  With VSOCKET_STATS=1 the process prints StatsJson() as one line
// to stderr at exit.
//
// The counters live in the process's live statistics page
// (vsocket/live_stats.h), which vsocket-stat reads: the totals in its
// header, and the bytes of each open connection in that connection's slot,
// written by the connection's own calls (the per-connection overloads
// below: no read-modify-write on a line other connections share); a slot's
// bytes join the totals when the connection closes.
//
// JSON shape (stable, documented in README):
//   {"pid":123,"transports":{"shm":{"connections":2,"bytes_sent":10,
//    "bytes_received":10}, "tcp":{...}},"fallback_reasons":{"peer_not_vsocket":1},
//    "rdma_registered":{"bytes":0,"peak_bytes":4202496,
//    "max_per_connection_bytes":2097152,"limit_bytes":268435456,
//    "user_region_bytes":67108864}}
// Transports and reasons with a zero count are left out.  Providers add
// sections of their own after fallback_reasons (RegisterStatsSection):
// rdma_registered (RDMA's stats section) appears once an RDMA
// connection existed, user_region_bytes only while registered application
// buffers are.
#ifndef VSOCKET_VSOCKET_STATS_H_
#define VSOCKET_VSOCKET_STATS_H_

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <string>

#include "vsocket/fallback_reason.h"
#include "vsocket/live_stats_layout.h"
#include "vsocket/transport_kind.h"

namespace vsocket {


struct TransportCounters;  // opaque

void StatsConnectionOpened(TransportKind kind);
void StatsConnectionMoved(TransportKind from, TransportKind to);
// Bytes of no particular connection (counted in the totals at once).
void StatsBytesSent(TransportKind kind, uint64_t bytes);
void StatsBytesReceived(TransportKind kind, uint64_t bytes);

// Bytes of one connection, `slot` being its Transport::live_slot() (null:
// the connection has no slot; the totals count them).  Any thread.
inline void StatsBytesSent(LiveSlot* slot, TransportKind kind, uint64_t bytes) {
  if (!slot) return StatsBytesSent(kind, bytes);
  slot->bytes_sent[KindIndex(kind)].fetch_add(bytes, std::memory_order_relaxed);
}
inline void StatsBytesReceived(LiveSlot* slot, TransportKind kind, uint64_t bytes) {
  if (!slot) return StatsBytesReceived(kind, bytes);
  slot->bytes_received[KindIndex(kind)].fetch_add(bytes, std::memory_order_relaxed);
}
// The same without a read-modify-write: a relaxed load and store.
// REQUIRES: the caller serialises this direction of this connection within
// the process (the shared-memory transport's send or receive lock).
inline void StatsBytesSentSerialised(LiveSlot* slot, TransportKind kind, uint64_t bytes) {
  if (!slot) return StatsBytesSent(kind, bytes);
  std::atomic<uint64_t>& c = slot->bytes_sent[KindIndex(kind)];
  c.store(c.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}
inline void StatsBytesReceivedSerialised(LiveSlot* slot, TransportKind kind,
                                         uint64_t bytes) {
  if (!slot) return StatsBytesReceived(kind, bytes);
  std::atomic<uint64_t>& c = slot->bytes_received[KindIndex(kind)];
  c.store(c.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
}
// Bytes counted as sent on `from` that `to` carried in the end (an offer's
// ring replayed into TCP after a decline): at most what `from` counted
// moves, so that a count never wraps.  Any thread.
void StatsBytesSentMoved(LiveSlot* slot, TransportKind from, TransportKind to,
                         uint64_t bytes);
// The bytes sent and not yet consumed in the connection's send ring, for
// vsocket-stat.  REQUIRES: as StatsBytesSentSerialised.
inline void StatsSendRingFill(LiveSlot* slot, uint64_t bytes) {
  if (slot) slot->send_ring_fill.store(bytes, std::memory_order_relaxed);
}
// Counts the reason and logs it once per process at info level.
void StatsFallback(FallbackReason reason, const char* detail);

// A provider's own part of the JSON: appends `,"name":{...}` (or nothing
// while it has nothing to say) to *out.  Called by StatsJson() on any
// thread, also at exit; must not block.  Registering one twice is a no-op;
// room for eight.
using StatsSection = void (*)(std::string* out);
void RegisterStatsSection(StatsSection section);

std::string StatsJson();

// Registers the at-exit printer if VSOCKET_STATS is set.  Idempotent.
void StatsInstallExitHook();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_STATS_H_
