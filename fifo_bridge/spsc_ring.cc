#include "fifo_bridge/spsc_ring.h"

#include <algorithm>
#include <cstring>

#include "base/user_copy_guard.h"

namespace vsocket::fifo {
namespace {

// Calls fn(iov_base_pointer, length) for each piece of the iovec array that
// lies in [skip, skip + limit), in order; fn returns false when the caller's
// memory faulted.  Returns the bytes visited, or kUserFault at a piece fn
// refused or whose base is null: the kernel's EFAULT, and a null pointer
// must not reach memcpy (undefined behaviour, not a fault the guard could
// be counted on to catch).
template <typename Fn>
int64_t ForEachIovSpan(const struct iovec* iov, int iovcnt, size_t skip,
                       uint64_t limit, Fn fn) {
  uint64_t done = 0;
  for (int i = 0; i < iovcnt && done < limit; ++i) {
    size_t len = iov[i].iov_len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    if (iov[i].iov_base == nullptr) return kUserFault;
    auto* base = static_cast<uint8_t*>(iov[i].iov_base) + skip;
    uint64_t take = std::min<uint64_t>(len - skip, limit - done);
    skip = 0;
    if (!fn(base, take)) [[unlikely]] return kUserFault;
    done += take;
  }
  return static_cast<int64_t>(done);
}

// Bytes the iovec array holds past `skip`.
uint64_t IovBytesAfter(const struct iovec* iov, int iovcnt, size_t skip) {
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total > skip ? total - skip : 0;
}

}  // namespace

int64_t RingProducer::FreeSpace() const {
  uint64_t seen = seen_tail_.load(std::memory_order_acquire);
  if (seen != kNotRead) {
    uint64_t used = OwnHead() - seen;
    uint64_t limit = limit_.load(std::memory_order_relaxed);
    if (used < limit && limit - used >= limit / 2)
      return static_cast<int64_t>(limit - used);
  }
  return FreeSpaceNow();
}

int64_t RingProducer::FreeSpaceNow() const {
  uint64_t tail = control_->tail.load(std::memory_order_acquire);
  seen_tail_.store(tail, std::memory_order_release);
  uint64_t used = OwnHead() - tail;  // wraps to a huge value if tail > head
  if (used > capacity_) return kCorrupt;
  uint64_t limit = limit_.load(std::memory_order_relaxed);
  if (used >= limit) return 0;
  return static_cast<int64_t>(limit - used);
}

int64_t RingProducer::Write(const struct iovec* iov, int iovcnt, size_t skip,
                            bool hold, uint64_t max_bytes) {
  int64_t space = FreeSpace();
  // The cached tail may undercount: look again before writing less.
  if (space > 0 && static_cast<uint64_t>(space) < max_bytes &&
      static_cast<uint64_t>(space) < IovBytesAfter(iov, iovcnt, skip))
    space = FreeSpaceNow();
  if (space <= 0) return space;
  if (static_cast<uint64_t>(space) > max_bytes) space = static_cast<int64_t>(max_bytes);
  uint64_t head = OwnHead();
  uint64_t mask = capacity_ - 1;
  // A bad pointer stops the copy before the head is published.  A piece
  // wraps at most once: it is no longer than the free space.
  int64_t copied = ForEachIovSpan(
      iov, iovcnt, skip, static_cast<uint64_t>(space),
      [&](const uint8_t* src, uint64_t len) {
        uint64_t pos = head & mask;
        uint64_t first = std::min(len, capacity_ - pos);
        if (CopyUserBytes(data_ + pos, src, first) != first) return false;
        if (len != first && CopyUserBytes(data_, src + first, len - first) != len - first)
          return false;
        head += len;
        return true;
      });
  if (copied == kUserFault) return kUserFault;
  if (copied > 0) {
    std::atomic_ref<uint64_t>(*own_head_).store(head, std::memory_order_relaxed);
    if (!hold) [[likely]] {
      control_->head.store(head, std::memory_order_release);
    } else {
      control_->written.store(head, std::memory_order_release);
    }
  }
  return static_cast<int64_t>(copied);
}

uint64_t RingProducer::Held() const {
  uint64_t held = OwnHead() - control_->head.load(std::memory_order_relaxed);
  return held <= capacity_ ? held : 0;
}

uint64_t RingProducer::Publish() {
  uint64_t held = Held();
  if (held != 0) control_->head.store(OwnHead(), std::memory_order_release);
  return held;
}

int64_t RingConsumer::Available() const {
  uint64_t seen = seen_head_.load(std::memory_order_acquire);
  if (seen != kNotRead) {
    uint64_t avail = seen - OwnTail();
    if (avail != 0 && avail <= capacity_) return static_cast<int64_t>(avail);
  }
  return AvailableNow();
}

int64_t RingConsumer::AvailableNow() const {
  uint64_t head = control_->head.load(std::memory_order_acquire);
  seen_head_.store(head, std::memory_order_release);
  uint64_t avail = head - OwnTail();  // wraps to a huge value if head < tail
  if (avail > capacity_) return kCorrupt;
  return static_cast<int64_t>(avail);
}

int64_t RingConsumer::Read(const struct iovec* iov, int iovcnt, size_t skip,
                           bool peek) {
  int64_t avail = Available();
  // The cached head may undercount: look again before reading less.
  if (avail > 0 && static_cast<uint64_t>(avail) < IovBytesAfter(iov, iovcnt, skip))
    avail = AvailableNow();
  if (avail <= 0) return avail;
  uint64_t tail = OwnTail();
  uint64_t mask = capacity_ - 1;
  // A bad pointer stops the copy before the tail is published: nothing
  // is consumed.  A piece wraps at most once: it is no longer than what
  // is readable.
  int64_t copied = ForEachIovSpan(
      iov, iovcnt, skip, static_cast<uint64_t>(avail),
      [&](uint8_t* dst, uint64_t len) {
        uint64_t pos = tail & mask;
        uint64_t first = std::min(len, capacity_ - pos);
        if (CopyUserBytes(dst, data_ + pos, first) != first) return false;
        if (len != first && CopyUserBytes(dst + first, data_, len - first) != len - first)
          return false;
        tail += len;
        return true;
      });
  if (copied == kUserFault) return kUserFault;
  if (copied > 0 && !peek) {
    std::atomic_ref<uint64_t>(*own_tail_).store(tail, std::memory_order_relaxed);
    control_->tail.store(tail, std::memory_order_release);
  }
  return static_cast<int64_t>(copied);
}

int64_t RingConsumer::Discard(uint64_t len) {
  int64_t avail = Available();
  if (avail <= 0) return avail;
  uint64_t take = std::min<uint64_t>(len, static_cast<uint64_t>(avail));
  uint64_t tail = OwnTail() + take;
  std::atomic_ref<uint64_t>(*own_tail_).store(tail, std::memory_order_relaxed);
  control_->tail.store(tail, std::memory_order_release);
  return static_cast<int64_t>(take);
}

uint64_t RingConsumer::TakeHeld() {
  uint64_t written = control_->written.load(std::memory_order_acquire);
  uint64_t head = control_->head.load(std::memory_order_acquire);
  uint64_t held = written - head;
  if (held == 0 || held > capacity_ || written - OwnTail() > capacity_) return 0;
  control_->head.store(written, std::memory_order_release);
  return held;
}

int64_t RingConsumer::Contiguous(const uint8_t** data) const {
  int64_t avail = AvailableNow();  // the in-place view: as long as it can be
  if (avail <= 0) return avail;
  uint64_t pos = OwnTail() & (capacity_ - 1);
  *data = data_ + pos;
  return static_cast<int64_t>(
      std::min<uint64_t>(static_cast<uint64_t>(avail), capacity_ - pos));
}

}  // namespace vsocket::fifo
