// ShmChannel's memory that follows use: the transmit ring's pages are
// allocated as data first passes through them (the segment is a sparse
// shared file), accounted in VSOCKET_STATS, and given back once the ring
// has been idle and empty for a second.  The producer is the ring's only
// writer and the consumer reads only bytes between tail and head, so while
// the producer holds its send lock and the ring is empty, no one touches
// the data pages: dropping them cannot lose a byte.
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "fifo_bridge/shm_memory_stats.h"
#include "fifo_bridge/shm_channel.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {
namespace {

constexpr uint64_t kTrimAfterBytes = 256 * 1024;  // written since the last trim
constexpr int64_t kIdleLookNs = 1000000000;        // one look a second
constexpr uint64_t kAccountStep = 64 * 1024;
// Writes that reach this far into untouched ring populate it first.
constexpr uint64_t kPopulateAtLeast = 16 * 1024;
// Per side, whatever the rings hold: its share of the segment's header page
// (its SideState slot) and ring control pages, plus a SideState page of its
// own when the segment is sealed.
int64_t FixedBytes(bool side_in_segment) {
  return 2 * 4096 + (side_in_segment ? 0 : 4096);
}

}  // namespace

bool ShmChannel::AfterRingWrite() {
  uint64_t written = side_->head - side_->trimmed_head;
  uint64_t touched = std::min<uint64_t>(written, producer_->capacity());
  const int64_t fixed = FixedBytes(side_in_segment_);
  int64_t want = fixed +
                 static_cast<int64_t>((touched + kAccountStep - 1) / kAccountStep * kAccountStep);
  if (want > accounted_bytes_) {
    StatsShmMemory(want - accounted_bytes_);
    accounted_bytes_ = want;
  }
  if (!trim_scheduled_ && written >= kTrimAfterBytes &&
      attached_.load(std::memory_order_relaxed)) {
    trim_scheduled_ = true;
    trim_look_head_ = ~uint64_t{0};
    return true;
  }
  return false;
}

void ShmChannel::PopulateAhead(uint64_t len) {
  // Kernels before 5.14 lack the advice: then the faults do it.
  static std::atomic<bool> unsupported{false};
  uint64_t capacity = producer_->capacity();
  if (RingPopulated()) return;
  uint64_t written = side_->head - side_->trimmed_head;
  uint64_t want = std::min(capacity, written + len);
  if (want <= populated_) return;
  uint64_t from_bytes = populated_;
  // Whatever the write touches is there afterwards, populated or faulted.
  populated_ = want;
  // Small writes fault their page in: one fault costs what one madvise
  // does, and a stream of small messages makes no system call.
  if (want - from_bytes < kPopulateAtLeast || unsupported.load(std::memory_order_relaxed))
    return;
  Direction tx = role_ == ShmRole::kClient ? Direction::kClientToServer
                                        : Direction::kServerToClient;
  uint8_t* data = segment_->data(tx);
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Positions [trimmed_head + from_bytes, trimmed_head + want) mod capacity,
  // widened to whole pages (the segment maps whole pages around the ring).
  uint64_t from = (side_->trimmed_head + from_bytes) & (capacity - 1);
  uint64_t bytes = want - from_bytes;
  while (bytes > 0) {
    uint64_t chunk = std::min(bytes, capacity - from);
    uintptr_t begin = reinterpret_cast<uintptr_t>(data + from) / page * page;
    uintptr_t end = (reinterpret_cast<uintptr_t>(data + from + chunk) + page - 1) / page * page;
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0) {
      if (errno == EINVAL) unsupported.store(true, std::memory_order_relaxed);
      return;  // no room, or no such advice: the faults will tell
    }
    bytes -= chunk;
    from = (from + chunk) & (capacity - 1);
  }
}

void ShmChannel::LookScheduler::ArmIdleLook() { ArmAt(MonotonicNs() + kIdleLookNs); }

ShmChannel::LookScheduler::~LookScheduler() {
  if (at_ns_ != 0) WatchDeadlineBy(target_, at_ns_);
}

int64_t ShmChannel::TrimIdleRing() {
  SideLock lock(&side_->send_lock, /*try_only=*/true);
  if (!lock.owns_lock()) return MonotonicNs() + kIdleLookNs;  // busy now
  if (!trim_scheduled_) return 0;
  if (stopped() || PeerStoppedRings()) {
    trim_scheduled_ = false;
    return 0;
  }
  uint64_t head = side_->head;
  bool idle = head == trim_look_head_;
  trim_look_head_ = head;
  if (!idle || tx_->tail.load(std::memory_order_acquire) != head)
    return MonotonicNs() + kIdleLookNs;
  Direction tx = role_ == ShmRole::kClient ? Direction::kClientToServer
                                        : Direction::kServerToClient;
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(segment_->data(tx));
  uintptr_t end = begin + producer_->capacity();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin && ::madvise(reinterpret_cast<void*>(begin), end - begin,
                               MADV_REMOVE) == 0) {
    side_->trimmed_head = head;
    populated_ = 0;
    const int64_t fixed = FixedBytes(side_in_segment_);
    StatsShmTrim(static_cast<uint64_t>(accounted_bytes_ - fixed));
    StatsShmMemory(fixed - accounted_bytes_);
    accounted_bytes_ = fixed;
  }
  trim_scheduled_ = false;
  return 0;
}

void ShmChannel::ForgetRingBytes() {
  SideLock lock(&side_->send_lock);
  if (accounted_bytes_ != 0) StatsShmMemory(-accounted_bytes_);
  accounted_bytes_ = 0;
}

}  // namespace vsocket::fifo
