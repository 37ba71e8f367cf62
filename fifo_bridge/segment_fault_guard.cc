#include "fifo_bridge/segment_fault_guard.h"

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/shared_file_fault_guard.h"
#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_pool.h"
#include "fifo_bridge/shm_segment.h"

namespace vsocket::fifo {
namespace {

constexpr size_t kPage = 4096;

// Async-signal-safe: a segment's mapping gets zero pages and reset rings.
bool RecoverSegment(const SharedFileMapping& m) {
  const char* name = std::strrchr(m.path, '/');
  // A pool resets every connection of its own, and no other.
  if (name != nullptr && std::strncmp(name + 1, "pool-", 5) == 0) return RecoverPoolMapping(m);
  if (m.offset != 0) return false;
  if (name != nullptr && std::strncmp(name + 1, "stat-", 5) == 0) return false;
  size_t bytes = m.end - m.start;
  if (bytes < kSegmentHeaderBytes + 2 * kPage || (bytes - kSegmentHeaderBytes) % (2 * kPage))
    return false;
  static std::atomic<bool> said{false};
  static const char kMessage[] =
      "vsocket: warn: a shared-memory segment lost its pages (truncated by the peer, or "
      "/dev/shm full); that connection is reset\n";
  // The header page was written at creation, so only a truncation takes it.
  // While it is there it stays shared: it holds each side's SideState,
  // whose locks other threads and forked processes may be waiting on (a
  // private copy would never wake them).  Only the rings become zero pages.
  char probe = 0;
  struct iovec local = {&probe, 1}, remote = {reinterpret_cast<void*>(m.start), 1};
  bool header_intact =
      ::syscall(SYS_process_vm_readv, ::syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL) == 1;
  SharedFileMapping lost = m;
  if (header_intact) lost.start += kSegmentHeaderBytes;
  if (!ReplaceWithZeroPages(lost, &said, kMessage)) return false;
  auto* base = reinterpret_cast<uint8_t*>(m.start);
  size_t stride = (bytes - kSegmentHeaderBytes) / 2;
  if (!header_intact) {
    reinterpret_cast<SegmentHeader*>(base)->claim.store(kClaimed, std::memory_order_relaxed);
  }
  for (size_t ring = 0; ring < 2; ++ring) {
    auto* control = reinterpret_cast<RingControl*>(base + kSegmentHeaderBytes + ring * stride);
    control->flags.store(kReset | kPagesLost, std::memory_order_release);
  }
  return true;
}

}  // namespace

void InstallSegmentFaultGuard() { GuardSharedFiles(RecoverSegment); }

}  // namespace vsocket::fifo
