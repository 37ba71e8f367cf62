// Producer and consumer halves of a single-producer/single-consumer byte ring
// laid out as in ring_layout.h.
//
// Trust model: the peer can write anything into the shared RingControl at any
// time.  Each half keeps its own index in memory the peer cannot reach (the
// `own_index` pointer) and treats the peer's index as untrusted input: every
// value is range-checked before it is used, and an impossible value makes the
// call return kCorrupt, after which the connection must be reset.
//
// Threading: at most one thread (in one process) uses a given half at a time;
// callers serialise with their own lock.  The two halves may run concurrently
// in different processes.
#ifndef VSOCKET_FIFO_BRIDGE_SPSC_RING_H_
#define VSOCKET_FIFO_BRIDGE_SPSC_RING_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/user_copy_guard.h"
#include "fifo_bridge/ring_layout.h"

namespace vsocket::fifo {

inline constexpr int64_t kCorrupt = -1;
// Write/Read: a caller's iovec pointed at memory the process may not
// access (base/user_copy_guard.h).  Nothing was published: the call is
// EFAULT to the caller, and the connection is fine.
inline constexpr int64_t kUserFault = -2;
// An index cache that holds nothing yet.
inline constexpr uint64_t kNotRead = ~uint64_t{0};

class RingProducer {
 public:
  // REQUIRES: `data` has `capacity` bytes; IsValidCapacity(capacity);
  //           *own_head is the producer's authoritative head.
  RingProducer(RingControl* control, uint8_t* data, uint64_t capacity,
               uint64_t* own_head)
      : control_(control), data_(data), capacity_(capacity),
        limit_(capacity), own_head_(own_head) {
    InstallUserCopyGuard();  // Write copies from the caller's iovecs
  }

  // Free bytes, or kCorrupt if the peer's tail is impossible.  At most the
  // window's worth of bytes is ever unconsumed.  Counted from the tail last
  // read while that leaves at least half the window free (a lower bound:
  // the tail only grows), so a streaming producer does not pull the
  // consumer's tail line on every write; read afresh otherwise, so every
  // answer below half the window (0 included) is exact.  Any thread.
  int64_t FreeSpace() const;
  // Free bytes with the consumer's tail read now.  Any thread.
  int64_t FreeSpaceNow() const;
  // Bounds the unconsumed bytes to `bytes` (0, or more than the capacity:
  // the whole ring).  Bytes already beyond a lowered window stay; nothing
  // more is written until the consumer is below it.
  void set_window(uint64_t bytes) {
    limit_.store((bytes == 0 || bytes > capacity_) ? capacity_ : bytes,
                 std::memory_order_relaxed);
  }
  uint64_t window() const { return limit_.load(std::memory_order_relaxed); }

  // Copies as many bytes as fit from the iovec array, starting `skip` bytes
  // into it, then publishes the new head (release): with it every byte held
  // before.  With `hold`, the bytes are held instead: the reader does not
  // see them until a later Write without `hold` or Publish(); the new head
  // goes to RingControl::written (release), from which a reader takes them
  // should this producer die (RingConsumer::TakeHeld).  Copies at most
  // `max_bytes`.  Returns the number of bytes copied (0 when full),
  // kCorrupt or kUserFault.
  int64_t Write(const struct iovec* iov, int iovcnt, size_t skip,
                bool hold = false, uint64_t max_bytes = UINT64_MAX);
  // Bytes written but held back from the reader (0 when the published head
  // is not one this producer could have written).  Any thread: exact under
  // the caller's lock, else a snapshot.
  uint64_t Held() const;
  // Publishes every held byte (release).  Returns how many were held.
  // REQUIRES: the caller's lock, as for Write.
  uint64_t Publish();

  uint64_t capacity() const { return capacity_; }
  RingControl* control() const { return control_; }

 private:
  RingControl* control_;
  uint8_t* data_;
  uint64_t capacity_;
  // The window: at most this many bytes unconsumed.  Set by the sender
  // (send lock), read without it by the liveness watcher (FreeSpace).
  std::atomic<uint64_t> limit_;
  // Written by the producer (the holder of the send lock); other threads
  // (poll, the liveness watcher) may read it without the lock, hence the
  // relaxed atomic accesses.
  uint64_t OwnHead() const {
    return std::atomic_ref<uint64_t>(*own_head_).load(std::memory_order_relaxed);
  }
  uint64_t* own_head_;
  // The consumer's tail as last read (acquire, then published release so
  // that another thread using it inherits the ordering), or kNotRead.
  mutable std::atomic<uint64_t> seen_tail_{kNotRead};
};

class RingConsumer {
 public:
  // REQUIRES: as for RingProducer, *own_tail is the consumer's authoritative
  //           tail.
  RingConsumer(RingControl* control, uint8_t* data, uint64_t capacity,
               uint64_t* own_tail)
      : control_(control), data_(data), capacity_(capacity),
        own_tail_(own_tail) {
    InstallUserCopyGuard();  // Read copies into the caller's iovecs
  }

  // Readable bytes, or kCorrupt if the peer's head is impossible.  Counted
  // from the head last read while that still shows unread bytes (a lower
  // bound: the head only grows), so a consumer that is behind does not pull
  // the producer's head line on every read; read afresh when it shows none,
  // so 0 is always exact.  Any thread.
  int64_t Available() const;
  // Readable bytes with the producer's head read now (FIONREAD).
  int64_t AvailableNow() const;

  // Copies up to the iovec capacity (starting `skip` bytes into it) out of the
  // ring.  Unless `peek`, advances and publishes the tail (release).
  // Returns bytes copied (0 when empty), kCorrupt or kUserFault.
  int64_t Read(const struct iovec* iov, int iovcnt, size_t skip, bool peek);

  // Drops up to `len` readable bytes without copying them.
  int64_t Discard(uint64_t len);

  // The producer is dead (no process holds its side any more): the bytes it
  // wrote but held back (RingControl::written) become readable, as kernel
  // TCP delivers what a dead process corked.  Returns how many (0 when
  // `written` shows none, or an impossible value: nothing changes then).
  // REQUIRES: no producer can write the ring any more.  Any thread.
  uint64_t TakeHeld();

  // In-place view for zero-copy reads: sets *data to the oldest unread byte
  // and returns how many readable bytes follow it contiguously (up to the
  // end of the data area; the rest, after a wrap, comes with the next
  // call), 0 when empty (*data untouched), or kCorrupt.  Neither copies nor
  // consumes: the bytes stay valid, and the producer cannot overwrite them,
  // until Discard() consumes them.  Bytes published later never move the
  // view's start.  Reads the producer's head afresh.
  int64_t Contiguous(const uint8_t** data) const;

  uint64_t capacity() const { return capacity_; }
  RingControl* control() const { return control_; }

 private:
  RingControl* control_;
  uint8_t* data_;
  uint64_t capacity_;
  // Written by the consumer (the holder of the receive lock); other threads
  // (poll, the liveness watcher's LiftPeerWriterBlock) read it without the
  // lock, hence the relaxed atomic accesses (plain moves on x86-64 and
  // arm64; found by ThreadSanitizer).
  uint64_t OwnTail() const {
    return std::atomic_ref<uint64_t>(*own_tail_).load(std::memory_order_relaxed);
  }
  uint64_t* own_tail_;
  // The producer's head as last read, as seen_tail_ above.
  mutable std::atomic<uint64_t> seen_head_{kNotRead};
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SPSC_RING_H_
