// The byte layout of one single-producer/single-consumer ring.
//
// A ring is a RingControl block followed (at kRingDataOffset) by `capacity`
// data bytes, capacity a power of two.  The layout is plain memory with no
// pointers, so the same ring can live in a memfd/shm mapping (intra-host) or in
// RDMA-registered memory written by a peer NIC (inter-host).
//
// Indices are free-running 64-bit byte counters: `head` counts bytes ever
// published, `tail` bytes ever consumed; data for index i lives at
// i & (capacity - 1).  `written` (>= head while a hold lasts, else stale
// and <= head) counts bytes the producer copied in but holds back from the
// reader (TCP_CORK, MSG_MORE: spsc_ring.h, RingProducer::Write): a reader
// whose producer died takes them as published (RingConsumer::TakeHeld).  Each side owns one index and keeps the authoritative
// copy in its own private memory; the copy here is only published for the
// peer.  Everything read from this block is untrusted (see spsc_ring.h).
#ifndef VSOCKET_FIFO_BRIDGE_RING_LAYOUT_H_
#define VSOCKET_FIFO_BRIDGE_RING_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace vsocket::fifo {

inline constexpr size_t kCacheLine = 64;

// Bits of RingControl::reader_wake (owned by the consumer, except PENDING which
// the producer sets when it rings the doorbell).
inline constexpr uint32_t kReaderArmed = 1u << 0;    // consumer wants a doorbell
inline constexpr uint32_t kReaderPending = 1u << 1;  // a doorbell is queued
// Set with PENDING by whoever is about to send the wake-up datagram, cleared
// once it is queued: a consumer must not clear PENDING in between, or the
// datagram would land after its drain and leave POLLIN with nothing to read.
inline constexpr uint32_t kReaderRinging = 1u << 2;

// Bits of RingControl::writer_wake (set by the producer when it made its own
// descriptor unwritable; cleared by the consumer when it lifted that state).
inline constexpr uint32_t kWriterBlocked = 1u << 0;

// Bits of RingControl::flags.
inline constexpr uint32_t kProducerClosed = 1u << 0;  // FIN: no more data
inline constexpr uint32_t kConsumerClosed = 1u << 1;  // reader gone: EPIPE
inline constexpr uint32_t kReset = 1u << 2;           // RST: abort both ways
// Never written by a peer: this process's segment fault guard sets it with
// kReset in the zero pages that replaced a lost ring (segment_fault_guard.h).
// Bytes read from such a ring are not data; after a peer's kReset the
// bytes it sent before are (the reader gets them first, as TCP's does).
inline constexpr uint32_t kPagesLost = 1u << 3;

struct RingControl {
  // Written by the producer only (and `head` by a consumer whose producer
  // is dead: RingConsumer::TakeHeld).
  alignas(kCacheLine) std::atomic<uint64_t> head;
  std::atomic<uint64_t> written;
  // Written by the consumer only.
  alignas(kCacheLine) std::atomic<uint64_t> tail;
  // Wake-up protocol; touched only on the slow path.
  alignas(kCacheLine) std::atomic<uint32_t> reader_wake;
  std::atomic<uint32_t> writer_wake;
  std::atomic<uint32_t> flags;
  // Written by the consumer: the receive buffer its application asked for
  // (SO_RCVBUF as the kernel reports it), 0 if it asked for none.  Bounds
  // the bytes the producer keeps in flight (shm_channel.h, SendWindow).
  std::atomic<uint32_t> recv_window;
  // Written by the producer before it sets kWriterBlocked: the consumer
  // lifts the block once at most this many bytes are unconsumed (half the
  // producer's window, so blocking and lifting are a quarter of the window
  // apart).  0: once a quarter of the ring is free.
  std::atomic<uint32_t> writer_lift;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr size_t kRingDataOffset =
    (sizeof(RingControl) + kCacheLine - 1) / kCacheLine * kCacheLine;

// Bytes one ring of `capacity` data bytes occupies.
inline constexpr size_t RingBytes(size_t capacity) {
  return kRingDataOffset + capacity;
}

inline constexpr bool IsValidCapacity(uint64_t capacity) {
  return capacity >= 4096 && capacity <= (1ull << 30) &&
         (capacity & (capacity - 1)) == 0;
}

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_RING_LAYOUT_H_
