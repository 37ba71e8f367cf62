// This process's live statistics page (layout: vsocket/live_stats_layout.h),
// which `vsocket-stat` reads: the process totals behind VSOCKET_STATS and
// one slot per open connection.
//
// The page is made at the first connect() or listen() (api.cc), or at the
// first call that needs it:
// the file /dev/shm/vsocket-<uid>/live-<pidns>/stat-<pid> (<pidns>: this
// PID namespace, base/pid_namespace.h), mode 0600, unlinked at exit;
// with VSOCKET_LIVE_STATS=0, or when the file cannot be made, the same
// layout in private anonymous memory, so counting works the same and only
// vsocket-stat does not see the process.  The memory is never unmapped, so
// a pointer to a slot stays valid (if stale) for the process's life.
// After fork() the child writes a page of its own (a copy of the parent's,
// remapped at the same addresses); across exec the file is set aside and
// the new image's page replaces it (or vsocket-stat removes it once the
// process has gone).
//
// Threading: every function may be called from any thread.  Slot identity
// changes take one process-wide mutex (connection setup and teardown, never
// per message); the byte counters are written without it (stats.h).
#ifndef VSOCKET_VSOCKET_LIVE_STATS_H_
#define VSOCKET_VSOCKET_LIVE_STATS_H_

#include <cstdint>
#include <string>

#include "vsocket/connection_endpoints.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/live_stats_layout.h"
#include "vsocket/transport_kind.h"

namespace vsocket {

// The page, made on first use.  Never null.
LiveHeader* LiveStatsHeader();
// The page if it was made, else null (StatsJson at exit makes none).
LiveHeader* LiveStatsHeaderIfMade();

struct LiveSlotIdentity {
  int fd = -1;
  int tcp_fd = -1;  // names what `ends` does not (getsockname/getpeername)
  const ConnectionEndpoints* ends = nullptr;  // may be null
  TransportKind kind = TransportKind::kTcp;
  FallbackReason reason = FallbackReason::kNone;
  bool accepted = false;
  uint32_t rule_line = 0;
  uint32_t ring_bytes = 0;
};
// A slot for a new connection, or null when every slot is taken (the
// connection is counted in the totals directly and in `unlisted`).
LiveSlot* LiveSlotOpen(const LiveSlotIdentity& identity);
// Changes under the slot's seqlock.  REQUIRES: slot from LiveSlotOpen, not
// yet closed; null is ignored.
void LiveSlotSetTransport(LiveSlot* slot, TransportKind kind, FallbackReason reason);
void LiveSlotAddFlags(LiveSlot* slot, uint32_t flags);
void LiveSlotSetFd(LiveSlot* slot, int fd);
// The connection is gone: its bytes move into the totals, the slot is
// free.  Null is ignored.
void LiveSlotClose(LiveSlot* slot);

// Adds the bytes of every open slot to the arrays (kLiveKinds each).
void LiveStatsSumOpen(uint64_t* sent, uint64_t* received);

// Around exec() (preload/interpose_exec.cc): the file is renamed aside so
// an image that is not preloaded does not look alive with stale
// connections; a failed exec renames it back.
void LiveStatsBeforeExec();
void LiveStatsAfterFailedExec();

// /dev/shm/vsocket-<euid>: the per-user directory (0700) that the
// shared-memory segments use too.  Made if missing; "" if it cannot be
// made or is not the user's own.
std::string LiveStatsDirectory();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_LIVE_STATS_H_
