#include "fifo_bridge/segment_fault_guard.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/shared_file_fault_guard.h"
#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_segment.h"

namespace vsocket::fifo {
namespace {

constexpr size_t kPage = 4096;

// Async-signal-safe: a segment's mapping gets zero pages and reset rings.
bool RecoverSegment(const SharedFileMapping& m) {
  if (m.offset != 0) return false;
  const char* name = std::strrchr(m.path, '/');
  if (name != nullptr && std::strncmp(name + 1, "stat-", 5) == 0) return false;
  size_t bytes = m.end - m.start;
  if (bytes < kSegmentHeaderBytes + 2 * kPage || (bytes - kSegmentHeaderBytes) % (2 * kPage))
    return false;
  static std::atomic<bool> said{false};
  if (!ReplaceWithZeroPages(m, &said,
                            "vsocket: warn: a shared-memory segment lost its pages (truncated "
                            "by the peer, or /dev/shm full); that connection is reset\n")) {
    return false;
  }
  auto* base = reinterpret_cast<uint8_t*>(m.start);
  size_t stride = (bytes - kSegmentHeaderBytes) / 2;
  reinterpret_cast<SegmentHeader*>(base)->claim.store(kClaimed, std::memory_order_relaxed);
  for (size_t ring = 0; ring < 2; ++ring) {
    auto* control = reinterpret_cast<RingControl*>(base + kSegmentHeaderBytes + ring * stride);
    control->flags.store(kReset, std::memory_order_release);
  }
  return true;
}

}  // namespace

void InstallSegmentFaultGuard() { GuardSharedFiles(RecoverSegment); }

}  // namespace vsocket::fifo
