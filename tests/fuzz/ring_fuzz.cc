// The SPSC ring halves (fifo_bridge/spsc_ring.h) against a peer that writes
// anything into the shared RingControl.  One ring, a producer and a
// consumer on it (each with its index in private memory), and a "peer" that
// overwrites head, tail, flags and the wake words between their calls, as
// the other process (or an RDMA NIC) could.
//
// Checks: every data access stays in the data area (it is a heap block of
// exactly RingBytes(capacity), so ASan sees one byte past it); an
// impossible peer index gives kCorrupt and leaves the private index alone;
// a possible one gives at most that many bytes; and while the peer never
// lied, the consumer reads exactly the bytes the producer wrote.
//
// Input: one byte picks the capacity (4, 8 or 16 KiB), then operations of
// one opcode byte and their operands, until the input ends.
#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/spsc_ring.h"
#include "fuzz_input.h"

namespace {

using vsocket::fifo::kCorrupt;
using vsocket::fifo::RingConsumer;
using vsocket::fifo::RingControl;
using vsocket::fifo::RingProducer;
using vsocket_fuzz::FuzzInput;

// The byte the honest producer writes at ring index i.
uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>(i * 131 + (i >> 8) + 7); }

// Splits `buf` into up to three iovecs at input-chosen points.
int MakeIov(FuzzInput* in, uint8_t* buf, size_t len, struct iovec iov[3]) {
  size_t a = len == 0 ? 0 : in->Take<uint16_t>() % (len + 1);
  size_t b = len == 0 ? 0 : in->Take<uint16_t>() % (len + 1);
  if (a > b) std::swap(a, b);
  iov[0] = {buf, a};
  iov[1] = {buf + a, b - a};
  iov[2] = {buf + b, len - b};
  return 3;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint64_t capacity = 4096ull << (in.Take<uint8_t>() % 3);
  // Exactly the ring's bytes: one past the data area is outside the block.
  std::unique_ptr<uint8_t[]> block(new uint8_t[vsocket::fifo::RingBytes(capacity)]);
  std::memset(block.get(), 0, vsocket::fifo::RingBytes(capacity));
  auto* control = new (block.get()) RingControl();
  uint8_t* ring_data = block.get() + vsocket::fifo::kRingDataOffset;
  uint64_t own_head = 0, own_tail = 0;
  RingProducer producer(control, ring_data, capacity, &own_head);
  RingConsumer consumer(control, ring_data, capacity, &own_tail);
  bool honest = true;  // no peer write so far: the contents are checkable
  std::vector<uint8_t> buf(3 * capacity);

  while (!in.empty()) {
    uint8_t op = in.Take<uint8_t>();
    switch (op % 10) {
      case 0: {  // the peer writes head (what our consumer trusts least)
        uint64_t v = in.Take<uint64_t>();
        if (op & 0x80) v = own_tail + (v % (2 * capacity + 2)) - capacity;  // near
        control->head.store(v);
        honest = honest && v == own_head;
        break;
      }
      case 1: {  // the peer writes tail (what our producer trusts least)
        uint64_t v = in.Take<uint64_t>();
        if (op & 0x80) v = own_head + (v % (2 * capacity + 2)) - capacity;
        control->tail.store(v);
        honest = honest && v == own_tail;
        break;
      }
      case 2:  // flags and wake words: the ring halves must not care
        control->flags.store(in.Take<uint32_t>());
        control->reader_wake.store(in.Take<uint32_t>());
        control->writer_wake.store(in.Take<uint32_t>());
        control->recv_window.store(in.Take<uint32_t>());
        break;
      case 3: {  // consumer: Read or peek into a split buffer
        size_t len = in.Take<uint16_t>() % buf.size();
        size_t skip = in.Take<uint8_t>() % 8;
        bool peek = op & 0x40;
        struct iovec iov[3];
        int n = MakeIov(&in, buf.data(), len, iov);
        uint64_t head = control->head.load();
        uint64_t before = own_tail;
        int64_t got = consumer.Read(iov, n, skip, peek);
        // The consumer may still count from a head it read earlier (the
        // index cache), so a corrupt head is reported once that view is
        // used up, and never about a head that is not corrupt.
        if (got == kCorrupt) {
          FUZZ_CHECK(head - before > capacity);
          FUZZ_CHECK(own_tail == before);
          break;
        }
        FUZZ_CHECK(got >= 0);
        uint64_t room = len > skip ? len - skip : 0;
        FUZZ_CHECK(static_cast<uint64_t>(got) <= capacity);
        if (honest) FUZZ_CHECK(static_cast<uint64_t>(got) <= head - before);
        FUZZ_CHECK(static_cast<uint64_t>(got) <= room);
        FUZZ_CHECK(own_tail == (peek ? before : before + got));
        if (honest) {
          for (int64_t i = 0; i < got; ++i)
            FUZZ_CHECK(buf[skip + i] == Pattern(before + i));
        }
        if (!peek && got > 0) FUZZ_CHECK(control->tail.load() == own_tail);
        break;
      }
      case 4: {  // consumer: Discard
        uint64_t len = in.Take<uint32_t>();
        uint64_t head = control->head.load();
        uint64_t before = own_tail;
        int64_t got = consumer.Discard(len);
        if (got == kCorrupt) {
          FUZZ_CHECK(head - before > capacity && own_tail == before);
        } else {
          FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= len &&
                     static_cast<uint64_t>(got) <= capacity);
          if (honest) FUZZ_CHECK(static_cast<uint64_t>(got) <= head - before);
          FUZZ_CHECK(own_tail == before + got);
        }
        break;
      }
      case 5: {  // consumer: the in-place view, read to its last byte
        const uint8_t* view = nullptr;
        uint64_t head = control->head.load();
        int64_t got = consumer.Contiguous(&view);
        if (got == kCorrupt) {
          FUZZ_CHECK(head - own_tail > capacity);
          break;
        }
        FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= capacity);
        if (honest) FUZZ_CHECK(static_cast<uint64_t>(got) <= head - own_tail);
        if (got > 0) {
          FUZZ_CHECK(view >= ring_data && view + got <= ring_data + capacity);
          std::memcpy(buf.data(), view, static_cast<size_t>(got));
          if (honest) {
            for (int64_t i = 0; i < got; ++i)
              FUZZ_CHECK(buf[i] == Pattern(own_tail + i));
          }
        }
        break;
      }
      case 6: {  // consumer: Available
        uint64_t head = control->head.load();
        int64_t got = consumer.Available();
        if (got == kCorrupt) {
          FUZZ_CHECK(head - own_tail > capacity);
        } else if (honest) {
          // 0 is always exact; otherwise at most what is there.
          FUZZ_CHECK(got == 0 ? head == own_tail
                              : static_cast<uint64_t>(got) <= head - own_tail);
          FUZZ_CHECK(consumer.AvailableNow() == int64_t(head - own_tail));
        } else {
          FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= capacity);
        }
        break;
      }
      case 7: {  // producer: Write the pattern from a split buffer
        size_t len = in.Take<uint16_t>() % buf.size();
        size_t skip = in.Take<uint8_t>() % 8;
        for (size_t i = skip; i < len; ++i) buf[i] = Pattern(own_head + i - skip);
        struct iovec iov[3];
        int n = MakeIov(&in, buf.data(), len, iov);
        uint64_t tail = control->tail.load();
        uint64_t before = own_head;
        int64_t got = producer.Write(iov, n, skip);
        uint64_t used = before - tail;
        if (got == kCorrupt) {  // as for Read: once the cached tail is used up
          FUZZ_CHECK(used > capacity && own_head == before);
          break;
        }
        FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= producer.window());
        if (honest) {
          uint64_t free_bytes = used >= producer.window() ? 0 : producer.window() - used;
          FUZZ_CHECK(static_cast<uint64_t>(got) <= free_bytes);
        }
        FUZZ_CHECK(own_head == before + got);
        // Our consumer sees what we published; the peer's head is ours again.
        if (control->head.load() != own_head) honest = false;
        break;
      }
      case 8: {  // producer: FreeSpace
        uint64_t tail = control->tail.load();
        int64_t got = producer.FreeSpace();
        uint64_t used = own_head - tail;
        if (got == kCorrupt) {
          FUZZ_CHECK(used > capacity);
        } else if (honest) {
          FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= capacity - used);
          // Below half the window every answer is exact.
          if (static_cast<uint64_t>(got) < producer.window() / 2) {
            FUZZ_CHECK(got == producer.FreeSpaceNow());
          }
        } else {
          FUZZ_CHECK(got >= 0 && static_cast<uint64_t>(got) <= capacity);
        }
        break;
      }
      case 9:  // producer: a new window (0 and huge mean the whole ring)
        producer.set_window(in.Take<uint32_t>() % (2 * capacity));
        FUZZ_CHECK(producer.window() >= 1 && producer.window() <= capacity);
        break;
    }
  }
  return 0;
}
