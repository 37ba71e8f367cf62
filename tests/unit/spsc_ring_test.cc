// SPSC ring: wrap-around, partial transfers, iovec offsets, peeking,
// in-place views, held writes, and refusal of impossible indices published
// by a hostile peer.
#include "fifo_bridge/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

namespace vsocket::fifo {
namespace {

class RingTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kCapacity = 4096;
  void SetUp() override {
    memory_.assign(RingBytes(kCapacity) + kCacheLine, 0);
    auto addr = reinterpret_cast<uintptr_t>(memory_.data());
    auto* base = reinterpret_cast<uint8_t*>((addr + kCacheLine - 1) & ~(kCacheLine - 1));
    control_ = new (base) RingControl();
    data_ = base + kRingDataOffset;
    producer_ = std::make_unique<RingProducer>(control_, data_, kCapacity, &head_);
    consumer_ = std::make_unique<RingConsumer>(control_, data_, kCapacity, &tail_);
  }

  int64_t Put(const std::vector<uint8_t>& bytes, bool hold = false) {
    struct iovec iov = {const_cast<uint8_t*>(bytes.data()), bytes.size()};
    return producer_->Write(&iov, 1, 0, hold);
  }
  std::vector<uint8_t> Take(size_t max, bool peek = false) {
    std::vector<uint8_t> out(max);
    struct iovec iov = {out.data(), out.size()};
    int64_t n = consumer_->Read(&iov, 1, 0, peek);
    out.resize(n > 0 ? n : 0);
    return out;
  }

  std::vector<uint8_t> memory_;
  RingControl* control_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t head_ = 0, tail_ = 0;
  std::unique_ptr<RingProducer> producer_;
  std::unique_ptr<RingConsumer> consumer_;
};

std::vector<uint8_t> Pattern(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_F(RingTest, EmptyRingReadsNothing) {
  EXPECT_EQ(consumer_->Available(), 0);
  EXPECT_TRUE(Take(16).empty());
  EXPECT_EQ(producer_->FreeSpace(), static_cast<int64_t>(kCapacity));
}

// SO_SNDBUF/SO_RCVBUF: the window bounds the unconsumed bytes; lowering it
// below what is in flight stops writes until the consumer catches up.
TEST_F(RingTest, WindowBoundsUnconsumedBytes) {
  producer_->set_window(1000);
  EXPECT_EQ(producer_->FreeSpace(), 1000);
  EXPECT_EQ(Put(Pattern(1500, 0)), 1000);
  EXPECT_EQ(producer_->FreeSpace(), 0);
  EXPECT_EQ(Take(400).size(), 400u);
  EXPECT_EQ(producer_->FreeSpace(), 400);
  producer_->set_window(100);  // below the 600 in flight
  EXPECT_EQ(producer_->FreeSpace(), 0);
  EXPECT_EQ(Put(Pattern(10, 0)), 0);
  EXPECT_EQ(Take(600).size(), 600u);
  EXPECT_EQ(producer_->FreeSpace(), 100);
  producer_->set_window(0);  // the whole ring again
  EXPECT_EQ(producer_->FreeSpace(), static_cast<int64_t>(kCapacity));
  producer_->set_window(kCapacity * 4);
  EXPECT_EQ(producer_->window(), kCapacity);
}

TEST_F(RingTest, WrapsAroundAndKeepsOrder) {
  // Move the indices close to the end so the next write wraps.
  auto first = Pattern(3000, 0);
  ASSERT_EQ(Put(first), 3000);
  ASSERT_EQ(Take(3000), first);
  auto second = Pattern(2000, 7);
  ASSERT_EQ(Put(second), 2000);
  EXPECT_EQ(head_, 5000u);
  EXPECT_EQ(Take(2000), second);
  EXPECT_EQ(control_->tail.load(), 5000u);
}

TEST_F(RingTest, PartialWriteWhenFull) {
  auto big = Pattern(5000, 1);
  EXPECT_EQ(Put(big), static_cast<int64_t>(kCapacity));
  EXPECT_EQ(producer_->FreeSpace(), 0);
  EXPECT_EQ(Put(big), 0);
  auto got = Take(10000);
  ASSERT_EQ(got.size(), kCapacity);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), big.begin()));
}

TEST_F(RingTest, IovecWithSkipAndPeek) {
  std::vector<uint8_t> a = Pattern(10, 0), b = Pattern(10, 100);
  struct iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  ASSERT_EQ(producer_->Write(iov, 2, 5), 15);  // skips a[0..4]
  auto peeked = Take(4, /*peek=*/true);
  EXPECT_EQ(peeked, std::vector<uint8_t>({5, 6, 7, 8}));
  EXPECT_EQ(consumer_->Available(), 15);
  std::vector<uint8_t> out(20, 0xee);
  struct iovec out_iov[2] = {{out.data(), 3}, {out.data() + 3, 17}};
  ASSERT_EQ(consumer_->Read(out_iov, 2, 0, false), 15);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[4], 9);
  EXPECT_EQ(out[5], 100);
  EXPECT_EQ(out[14], 109);
}

TEST_F(RingTest, DiscardDropsBytes) {
  ASSERT_EQ(Put(Pattern(100, 0)), 100);
  EXPECT_EQ(consumer_->Discard(40), 40);
  EXPECT_EQ(Take(1)[0], 40);
}

TEST_F(RingTest, ContiguousViewNeitherCopiesNorConsumes) {
  const uint8_t* view = nullptr;
  EXPECT_EQ(consumer_->Contiguous(&view), 0);
  EXPECT_EQ(view, nullptr);  // untouched when empty
  ASSERT_EQ(Put(Pattern(100, 0)), 100);
  ASSERT_EQ(consumer_->Contiguous(&view), 100);
  EXPECT_EQ(view, data_);  // the ring's own memory, not a copy
  EXPECT_EQ(view[0], 0);
  EXPECT_EQ(view[99], 99);
  // Still unread: the producer cannot reuse those bytes.
  EXPECT_EQ(producer_->FreeSpaceNow(), static_cast<int64_t>(kCapacity - 100));
  EXPECT_EQ(control_->tail.load(), 0u);
  // Bytes published later extend the view but never move its start.
  ASSERT_EQ(Put(Pattern(10, 100)), 10);
  const uint8_t* again = nullptr;
  EXPECT_EQ(consumer_->Contiguous(&again), 110);
  EXPECT_EQ(again, view);
  // Discard() consumes part of it; the view then starts after.
  EXPECT_EQ(consumer_->Discard(60), 60);
  EXPECT_EQ(control_->tail.load(), 60u);
  ASSERT_EQ(consumer_->Contiguous(&view), 50);
  EXPECT_EQ(view, data_ + 60);
  EXPECT_EQ(view[0], 60);
}

TEST_F(RingTest, ContiguousViewStopsAtTheWrap) {
  // Move both indices close to the end of the data area.
  ASSERT_EQ(Put(Pattern(kCapacity - 16, 0)), static_cast<int64_t>(kCapacity - 16));
  ASSERT_EQ(consumer_->Discard(kCapacity - 16), static_cast<int64_t>(kCapacity - 16));
  std::vector<uint8_t> bytes = Pattern(48, 7);
  ASSERT_EQ(Put(bytes), 48);
  const uint8_t* view = nullptr;
  ASSERT_EQ(consumer_->Contiguous(&view), 16);  // up to the end only
  EXPECT_EQ(view, data_ + kCapacity - 16);
  EXPECT_EQ(0, std::memcmp(view, bytes.data(), 16));
  ASSERT_EQ(consumer_->Discard(16), 16);
  ASSERT_EQ(consumer_->Contiguous(&view), 32);  // the rest, from the start
  EXPECT_EQ(view, data_);
  EXPECT_EQ(0, std::memcmp(view, bytes.data() + 16, 32));
  ASSERT_EQ(consumer_->Discard(32), 32);
  EXPECT_EQ(consumer_->Contiguous(&view), 0);
}

TEST_F(RingTest, ContiguousViewRefusesAHostileHead) {
  control_->head.store(kCapacity + 1);
  const uint8_t* view = nullptr;
  EXPECT_EQ(consumer_->Contiguous(&view), kCorrupt);
  EXPECT_EQ(view, nullptr);
}

// TCP_CORK/MSG_MORE: held bytes take room but are not readable until
// published, by Publish() or by the next write without hold, in order.
TEST_F(RingTest, HeldBytesAreReadOnlyOncePublished) {
  EXPECT_EQ(Put(Pattern(10, 0), /*hold=*/true), 10);
  EXPECT_EQ(producer_->Held(), 10u);
  EXPECT_EQ(consumer_->AvailableNow(), 0);
  EXPECT_TRUE(Take(16).empty());
  EXPECT_EQ(producer_->FreeSpaceNow(), static_cast<int64_t>(kCapacity - 10));
  EXPECT_EQ(producer_->Publish(), 10u);
  EXPECT_EQ(producer_->Held(), 0u);
  EXPECT_EQ(producer_->Publish(), 0u);
  EXPECT_EQ(Take(16), Pattern(10, 0));
  EXPECT_EQ(Put(Pattern(5, 10), /*hold=*/true), 5);
  EXPECT_EQ(Put(Pattern(5, 15)), 5);  // publishes the held ones with it
  EXPECT_EQ(producer_->Held(), 0u);
  EXPECT_EQ(Take(16), Pattern(10, 10));
}

// A producer that died holding bytes: the reader takes them, once; a
// stale or impossible `written` changes nothing.
TEST_F(RingTest, ReaderTakesWhatADeadProducerHeld) {
  EXPECT_EQ(Put(Pattern(4, 0)), 4);
  EXPECT_EQ(consumer_->TakeHeld(), 0u);  // `written` stale (0)
  EXPECT_EQ(Put(Pattern(6, 4), /*hold=*/true), 6);
  EXPECT_EQ(consumer_->TakeHeld(), 6u);
  EXPECT_EQ(consumer_->TakeHeld(), 0u);
  EXPECT_EQ(Take(16), Pattern(10, 0));
  control_->written.store(tail_ + kCapacity + 1);  // hostile
  EXPECT_EQ(consumer_->TakeHeld(), 0u);
  EXPECT_EQ(consumer_->AvailableNow(), 0);
}

TEST_F(RingTest, HostileHeadIsRefused) {
  // The producer's published head runs past what the ring can hold.
  control_->head.store(kCapacity + 1);
  EXPECT_EQ(consumer_->Available(), kCorrupt);
  EXPECT_EQ(Take(16).size(), 0u);
  // A head behind our tail (wrapping backwards) is impossible too.
  tail_ = 100;
  control_->head.store(50);
  EXPECT_EQ(consumer_->AvailableNow(), kCorrupt);
  EXPECT_EQ(consumer_->Available(), kCorrupt);  // and stays so
}

TEST_F(RingTest, HostileTailIsRefused) {
  ASSERT_EQ(Put(Pattern(100, 0)), 100);
  control_->tail.store(101);  // consumed more than was written
  EXPECT_EQ(producer_->FreeSpaceNow(), kCorrupt);
  EXPECT_EQ(producer_->FreeSpace(), kCorrupt);  // and stays so
  EXPECT_EQ(Put(Pattern(1, 0)), kCorrupt);
  // The producer's own head never moved on the bad value.
  EXPECT_EQ(head_, 100u);
}

// The index caches: a producer reads the consumer's tail again only when
// the tail it last read leaves less than half the window; a consumer reads
// the head again only when the head it last read shows nothing unread.  So
// a bad index is found within half a window of writes, or at the next
// empty read.
TEST_F(RingTest, CachedIndicesAreLowerBoundsAndZeroIsExact) {
  ASSERT_EQ(Put(Pattern(100, 0)), 100);
  EXPECT_EQ(Take(40).size(), 40u);          // reads the head (100)
  ASSERT_EQ(Put(Pattern(10, 100)), 10);     // head 110, not looked at yet
  EXPECT_EQ(consumer_->Available(), 60);    // from the cached head
  EXPECT_EQ(consumer_->AvailableNow(), 70);
  EXPECT_EQ(Take(1000).size(), 70u);        // a larger read looks again
  EXPECT_EQ(consumer_->Available(), 0);     // 0 is always a fresh look
  // The producer counts from the tail it read until half the window is used.
  int64_t before = producer_->FreeSpace();
  EXPECT_LE(before, producer_->FreeSpaceNow());
  control_->tail.store(uint64_t{1} << 62);   // impossible, but not looked at
  int64_t wrote = 0;
  for (int i = 0; i < 64; ++i) {
    int64_t n = Put(Pattern(256, head_));
    if (n == kCorrupt) break;
    wrote += n;
  }
  EXPECT_LE(wrote, static_cast<int64_t>(kCapacity / 2 + 256));  // one write past
  EXPECT_EQ(producer_->FreeSpace(), kCorrupt);
}

TEST_F(RingTest, OwnIndexIsNotReadBackFromSharedMemory) {
  ASSERT_EQ(Put(Pattern(10, 0)), 10);
  control_->head.store(9999);  // peer scribbles on our published head
  ASSERT_EQ(Put(Pattern(10, 0)), 10);
  EXPECT_EQ(head_, 20u);
  EXPECT_EQ(control_->head.load(), 20u);
}

// A null base after good entries is the kernel's EFAULT, and nothing moves:
// it never reaches memcpy (undefined behaviour; UBSan's test build stops
// there).  Found by stream_calls_fuzz.
TEST_F(RingTest, NullBaseIsAFaultAndNothingMoves) {
  std::vector<uint8_t> bytes = Pattern(8, 1);
  struct iovec send[2] = {{bytes.data(), bytes.size()}, {nullptr, 8}};
  EXPECT_EQ(producer_->Write(send, 2, 0), kUserFault);
  EXPECT_EQ(consumer_->Available(), 0);
  ASSERT_EQ(Put(bytes), 8);
  uint8_t first[4];
  struct iovec recv[2] = {{first, sizeof first}, {nullptr, 4}};
  EXPECT_EQ(consumer_->Read(recv, 2, 0, /*peek=*/false), kUserFault);
  EXPECT_EQ(consumer_->Read(recv, 2, 0, /*peek=*/true), kUserFault);
  EXPECT_EQ(Take(16), bytes);  // every byte still there
}

TEST(RingLayoutTest, IndicesLiveOnSeparateCacheLines) {
  EXPECT_GE(offsetof(RingControl, tail) - offsetof(RingControl, head), kCacheLine);
  EXPECT_GE(offsetof(RingControl, reader_wake) - offsetof(RingControl, tail), kCacheLine);
  EXPECT_EQ(kRingDataOffset % kCacheLine, 0u);
  EXPECT_TRUE(IsValidCapacity(4096));
  EXPECT_FALSE(IsValidCapacity(4097));
  EXPECT_FALSE(IsValidCapacity(2048));
}

}  // namespace
}  // namespace vsocket::fifo
