// The layout of a process's live statistics page: the file
// /dev/shm/vsocket-<uid>/live-<pidns>/stat-<pid> (mode 0600; <pidns>: the
// inode of /proc/self/ns/pid in hex) that a vsocket process writes and
// `vsocket-stat` reads.  docs/PROTOCOL.md section 7 describes it.
//
// File: one LiveHeader (kLiveHeaderBytes), then `chunks` chunks of
// kLiveSlotsPerChunk LiveSlots each.  The writer appends a chunk by growing
// the file first and then publishing the new `chunks` count (release); a
// reader maps what the file size and that count both cover.
//
// Writer: the one process named by `pid`.  Reader: any process of the same
// user, read-only; it trusts nothing (every count and index is range
// checked) and never writes.
//
// Tearing: the header's text fields are written before the file gets its
// final name, and never change.  The totals are single 64-bit atomics.  A
// slot's identity (state, fd, addresses, transport, reason, rule) changes
// only under its seqlock: `seq` is odd while it is written, and a reader
// that saw the same even `seq` before and after copying the slot has a
// consistent copy.  The byte counters and the ring fill are single 64-bit
// atomics each, written by the connection's owner (see vsocket/stats.h).
#ifndef VSOCKET_VSOCKET_LIVE_STATS_LAYOUT_H_
#define VSOCKET_VSOCKET_LIVE_STATS_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace vsocket {

inline constexpr uint64_t kLiveMagic = 0x315441545345534bull;  // "KSESTAT1"
inline constexpr uint32_t kLiveVersion = 1;
inline constexpr size_t kLiveHeaderBytes = 4096;
inline constexpr size_t kLiveSlotBytes = 384;
inline constexpr uint32_t kLiveSlotsPerChunk = 128;
inline constexpr size_t kLiveChunkBytes = kLiveSlotBytes * kLiveSlotsPerChunk;
inline constexpr uint32_t kLiveMaxChunks = 128;  // 16384 connections listed
inline constexpr int kLiveKinds = 8;             // == kMaxTransportKinds
inline constexpr int kLiveReasons = 64;          // == kMaxFallbackReasons
inline constexpr int kLiveNameBytes = 32;

// An address as the kernel reported it (getsockname/getpeername).
struct LiveAddress {
  uint16_t family;  // AF_INET, AF_INET6, or 0 (unknown)
  uint16_t port;    // host byte order
  uint8_t addr[16]; // AF_INET: the first 4 bytes
};

struct LiveHeader {
  uint64_t magic;              // kLiveMagic, written last before the rename
  uint32_t version;            // kLiveVersion
  uint32_t header_bytes;       // kLiveHeaderBytes
  uint32_t slot_bytes;         // kLiveSlotBytes
  uint32_t slots_per_chunk;    // kLiveSlotsPerChunk
  std::atomic<uint32_t> chunks;  // chunks after the header (release)
  int32_t pid;                 // the writer
  uint64_t start_ticks;        // its start time (/proc/<pid>/stat field 22)
  uint64_t created_ns;         // CLOCK_MONOTONIC when the page was made
  char program[64];            // program_invocation_short_name
  char rules_file[192];        // the rules file in effect, "" if none
  char kind_names[kLiveKinds][16];              // "tcp", "shm", ...; "" unused
  // This process's name of each FallbackReason number ("" for 0 and
  // unused): backends number their reasons per process, in registration
  // order, so a reader goes by these names, never by a number.
  char reason_names[kLiveReasons][kLiveNameBytes];
  // Totals of the process: connections opened on each transport (moves
  // counted on the transport moved to), and bytes of connections already
  // closed (live ones are in their slots).  The process's VSOCKET_STATS
  // line is these plus the live slots.
  struct Kind {
    std::atomic<uint64_t> connections;
    std::atomic<uint64_t> bytes_sent;
    std::atomic<uint64_t> bytes_received;
  } kinds[kLiveKinds];
  std::atomic<uint64_t> reasons[kLiveReasons];  // connections per reason
  std::atomic<uint64_t> unlisted;  // connections that found no free slot
  // Slots ever handed out, counted from the first slot of chunk 0 (slots
  // are given lowest first): a reader need not look past it, so the pages
  // of a file's unused slots are never touched (tmpfs would allocate them).
  std::atomic<uint32_t> slots_used;
};
static_assert(sizeof(LiveHeader) <= kLiveHeaderBytes, "header too big");
static_assert(offsetof(LiveHeader, kinds) == 2480 && offsetof(LiveHeader, unlisted) == 3184 &&
                  offsetof(LiveHeader, slots_used) == 3192,
              "header layout changed: docs/PROTOCOL.md section 7");

enum LiveSlotState : uint32_t {
  kLiveSlotFree = 0,
  kLiveSlotOpen = 1,
};

enum LiveSlotFlags : uint32_t {
  kLiveAccepted = 1u << 0,   // server side (accept); else client (connect)
  kLiveShutRead = 1u << 1,   // shutdown(SHUT_RD) was called
  kLiveShutWrite = 1u << 2,  // shutdown(SHUT_WR) was called
};

struct alignas(64) LiveSlot {
  // Identity: changes under the seqlock (the writer's slot mutex).
  std::atomic<uint32_t> seq;  // odd while written
  uint32_t state;             // LiveSlotState
  int32_t fd;                 // the application's descriptor number
  uint32_t kind;              // the transport carrying it now
  uint32_t reason;            // FallbackReason (0: on a fast path), see reason_names
  uint32_t flags;             // LiveSlotFlags
  uint32_t rule_line;         // line of the rule that decided it; 0: none
  uint32_t ring_bytes;        // the send ring's capacity (0: no ring)
  uint64_t opened_ns;         // CLOCK_MONOTONIC at connect/accept
  LiveAddress local;
  LiveAddress peer;
  uint8_t pad0[128 - 40 - 2 * sizeof(LiveAddress)];
  // Written by the sending side of the connection.
  std::atomic<uint64_t> bytes_sent[kLiveKinds];  // per transport kind
  std::atomic<uint64_t> send_ring_fill;          // unconsumed bytes
  uint8_t pad1[128 - 8 * kLiveKinds - 8];
  // Written by the receiving side.
  std::atomic<uint64_t> bytes_received[kLiveKinds];
  uint8_t pad2[128 - 8 * kLiveKinds];
};
static_assert(sizeof(LiveSlot) == kLiveSlotBytes, "slot layout changed");
static_assert(offsetof(LiveSlot, bytes_sent) == 128, "slot layout changed");
static_assert(offsetof(LiveSlot, bytes_received) == 256, "slot layout changed");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "needs 64-bit atomics");

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_LIVE_STATS_LAYOUT_H_
