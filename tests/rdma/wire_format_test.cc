// Validation of the untrusted hello (RDMA CM private data).  Needs no device.
#include "rdma_backend/wire_format.h"

#include <gtest/gtest.h>

namespace vsocket::rdma {
namespace {

Hello Valid() {
  Hello h;
  h.ring_data_addr = 0x7f0000001000;
  h.rkey = 0x1234;
  h.capacity = 1 << 20;
  return h;
}

TEST(WireFormatTest, RoundTrip) {
  uint8_t buf[56] = {};
  EncodeHello(Valid(), buf);
  Hello out;
  ASSERT_TRUE(DecodeHello(buf, sizeof(buf), &out));  // IB pads to 56 bytes
  EXPECT_EQ(out.ring_data_addr, Valid().ring_data_addr);
  EXPECT_EQ(out.rkey, Valid().rkey);
  EXPECT_EQ(out.capacity, Valid().capacity);
}

TEST(WireFormatTest, CarriesTheClientsTcpPort) {
  uint8_t buf[kHelloBytes];
  Hello in = Valid();
  in.tcp_port = 40123;
  EncodeHello(in, buf);
  EXPECT_EQ(buf[6], 40123 & 0xff);  // little-endian at offset 6
  EXPECT_EQ(buf[7], 40123 >> 8);
  Hello out;
  ASSERT_TRUE(DecodeHello(buf, sizeof(buf), &out));
  EXPECT_EQ(out.tcp_port, 40123);
  EXPECT_EQ(out.rkey, in.rkey);  // the neighbours are untouched
}

TEST(WireFormatTest, RejectsShortOrMissing) {
  uint8_t buf[kHelloBytes];
  EncodeHello(Valid(), buf);
  Hello out;
  EXPECT_FALSE(DecodeHello(buf, kHelloBytes - 1, &out));
  EXPECT_FALSE(DecodeHello(nullptr, kHelloBytes, &out));
}

TEST(WireFormatTest, RejectsBadMagicAndVersion) {
  uint8_t buf[kHelloBytes];
  Hello out;
  EncodeHello(Valid(), buf);
  buf[0] ^= 1;
  EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &out));
  EncodeHello(Valid(), buf);
  buf[4] = 99;
  EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &out));
}

TEST(WireFormatTest, RejectsImpossibleRings) {
  uint8_t buf[kHelloBytes];
  Hello out;
  for (uint64_t cap : {uint64_t{0}, uint64_t{1000}, uint64_t{2048},
                       uint64_t{(1 << 20) + 4096}, kMaxRingCapacity * 2}) {
    Hello h = Valid();
    h.capacity = cap;
    EncodeHello(h, buf);
    EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &out)) << cap;
  }
  Hello h = Valid();
  h.ring_data_addr = 0;
  EncodeHello(h, buf);
  EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &out));
  h.ring_data_addr = ~uint64_t{0} - 100;  // addr + capacity overflows
  EncodeHello(h, buf);
  EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &out));
}

TEST(WireFormatTest, DeclineRoundTripsAndIsNoHello) {
  uint8_t buf[56] = {};  // IB pads to 56 bytes
  EncodeDecline(40123, DeclineCause::kMemoryLimit, buf);
  uint16_t port = 0;
  uint8_t cause = 0;
  ASSERT_TRUE(DecodeDecline(buf, sizeof(buf), &port, &cause));
  EXPECT_EQ(port, 40123);
  EXPECT_EQ(cause, static_cast<uint8_t>(DeclineCause::kMemoryLimit));
  // A server without the decline rule validates it as a hello: it must
  // refuse it (capacity 0), as it refuses any invalid request.
  Hello out;
  EXPECT_FALSE(DecodeHello(buf, kHelloBytes, &out));
  // A cause this version does not know still decodes (peer_declined_rdma).
  buf[12] = 200;
  ASSERT_TRUE(DecodeDecline(buf, kHelloBytes, &port, &cause));
  EXPECT_EQ(cause, 200);
}

TEST(WireFormatTest, HellosAndMalformedDeclinesAreNoDecline) {
  uint8_t buf[kHelloBytes];
  uint16_t port = 0;
  uint8_t cause = 0;
  EncodeHello(Valid(), buf);  // a hello leaves offset 12 zero
  EXPECT_FALSE(DecodeDecline(buf, sizeof(buf), &port, &cause));
  buf[12] = 1;  // ... and a hello with a ring is no decline either
  EXPECT_FALSE(DecodeDecline(buf, sizeof(buf), &port, &cause));
  EncodeDecline(1, DeclineCause::kMemoryLimit, buf);
  EXPECT_FALSE(DecodeDecline(buf, kHelloBytes - 1, &port, &cause));
  EXPECT_FALSE(DecodeDecline(nullptr, kHelloBytes, &port, &cause));
  buf[0] ^= 1;
  EXPECT_FALSE(DecodeDecline(buf, sizeof(buf), &port, &cause));
  EncodeDecline(1, DeclineCause::kMemoryLimit, buf);
  buf[4] = 2;
  EXPECT_FALSE(DecodeDecline(buf, sizeof(buf), &port, &cause));
}

TEST(WireFormatTest, ImmediateFieldsDoNotOverlap) {
  EXPECT_EQ(kImmData & kImmValueMask, 0u);
  EXPECT_EQ(kImmCredit & kImmValueMask, 0u);
  EXPECT_EQ(kImmControl & kImmValueMask, 0u);
  // Every byte count the channel can put in one immediate fits the value.
  EXPECT_LE(kMaxRingCapacity, uint64_t{kImmValueMask});
}

}  // namespace
}  // namespace vsocket::rdma
