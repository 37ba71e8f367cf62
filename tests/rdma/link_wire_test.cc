// Validation of what crosses a link (link_wire.h, PROTOCOL.md 6.5): the
// link hello, the control messages and the slot-carrying immediates.
// Needs no device.
#include "rdma_backend/link_wire.h"

#include <gtest/gtest.h>

namespace vsocket::rdma::link {
namespace {

LinkHello ValidHello() {
  LinkHello h;
  h.qp_index = 1;
  h.qp_count = 2;
  h.slots = 4096;
  h.link_id = 0x1122334455667788ull;
  return h;
}

TEST(LinkWireTest, HelloRoundTripsAndIsNotAVersion1Hello) {
  uint8_t buf[56] = {};  // IB pads private data to 56 bytes
  EncodeLinkHello(ValidHello(), buf);
  LinkHello out;
  ASSERT_TRUE(DecodeLinkHello(buf, sizeof(buf), &out));
  EXPECT_EQ(out.qp_index, 1);
  EXPECT_EQ(out.qp_count, 2);
  EXPECT_EQ(out.slots, 4096);
  EXPECT_EQ(out.link_id, 0x1122334455667788ull);
  EXPECT_TRUE(IsLinkHelloVersion(buf, sizeof(buf)));
  Hello v1;
  EXPECT_FALSE(DecodeHello(buf, sizeof(buf), &v1));  // an old server rejects it
  EncodeHello(Hello{0x1000, 7, 4096, 0}, buf);
  EXPECT_FALSE(IsLinkHelloVersion(buf, sizeof(buf)));
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
}

TEST(LinkWireTest, HelloRejectsImpossibleFields) {
  uint8_t buf[kLinkHelloBytes];
  LinkHello out;
  auto encode = [&](auto change) {
    LinkHello h = ValidHello();
    change(h);
    EncodeLinkHello(h, buf);
  };
  encode([](LinkHello& h) { h.qp_count = 0; });
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  encode([](LinkHello& h) { h.qp_count = kMaxQpsPerLink + 1; });
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  encode([](LinkHello& h) { h.qp_index = 2; });  // == qp_count
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  encode([](LinkHello& h) { h.slots = 0; });
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  encode([](LinkHello& h) { h.slots = kMaxSlots + 1; });
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  encode([](LinkHello& h) { h.link_id = 0; });
  EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out));
  for (size_t reserved : {10, 15, 24, 31}) {
    EncodeLinkHello(ValidHello(), buf);
    buf[reserved] = 1;
    EXPECT_FALSE(DecodeLinkHello(buf, sizeof(buf), &out)) << reserved;
  }
  EncodeLinkHello(ValidHello(), buf);
  EXPECT_FALSE(DecodeLinkHello(buf, kLinkHelloBytes - 1, &out));
  EXPECT_FALSE(DecodeLinkHello(nullptr, kLinkHelloBytes, &out));
}

Control Open() {
  Control c;
  c.op = ControlOp::kOpen;
  c.tcp_port = 40123;
  c.from_slot = 17;
  c.rkey = 0xabcd;
  c.capacity = 64 * 1024;
  c.ring_addr = 0x7f0000100000;
  return c;
}

Control Accept() {
  Control c = Open();
  c.op = ControlOp::kAccept;
  c.tcp_port = 0;
  c.to_slot = 17;
  c.from_slot = 4095;
  return c;
}

bool Decodes(const Control& c, Control* out, uint32_t slots = 4096,
             uint32_t peer_slots = 4096) {
  uint8_t buf[kControlBytes];
  EncodeControl(c, buf);
  return DecodeControl(buf, sizeof(buf), slots, peer_slots, out);
}

TEST(LinkWireTest, ControlMessagesRoundTrip) {
  Control out;
  ASSERT_TRUE(Decodes(Open(), &out));
  EXPECT_EQ(out.op, ControlOp::kOpen);
  EXPECT_EQ(out.tcp_port, 40123);
  EXPECT_EQ(out.from_slot, 17);
  EXPECT_EQ(out.to_slot, kNoSlot);
  EXPECT_EQ(out.rkey, 0xabcdu);
  EXPECT_EQ(out.capacity, 64u * 1024);
  EXPECT_EQ(out.ring_addr, 0x7f0000100000ull);
  ASSERT_TRUE(Decodes(Accept(), &out));
  EXPECT_EQ(out.to_slot, 17);
  EXPECT_EQ(out.from_slot, 4095);
  Control decline;
  decline.op = ControlOp::kDecline;
  decline.cause = 200;  // a cause this version does not know still decodes
  decline.to_slot = 17;
  ASSERT_TRUE(Decodes(decline, &out));
  EXPECT_EQ(out.cause, 200);
  Control cancel;
  cancel.op = ControlOp::kCancel;
  cancel.from_slot = 17;
  ASSERT_TRUE(Decodes(cancel, &out));
}

TEST(LinkWireTest, ControlRejectsWhatAPeerNeverSends) {
  Control out;
  uint8_t buf[kControlBytes + 1] = {};
  EncodeControl(Open(), buf);
  EXPECT_FALSE(DecodeControl(buf, kControlBytes + 1, 4096, 4096, &out));
  EXPECT_FALSE(DecodeControl(buf, kControlBytes - 1, 4096, 4096, &out));
  buf[0] = 9;  // unknown op
  EXPECT_FALSE(DecodeControl(buf, kControlBytes, 4096, 4096, &out));
  EncodeControl(Open(), buf);
  buf[30] = 1;  // reserved
  EXPECT_FALSE(DecodeControl(buf, kControlBytes, 4096, 4096, &out));

  auto bad = [&](Control c) { return !Decodes(c, &out, 64, 32); };
  Control c = Open();
  c.from_slot = 32;  // beyond the peer's offer
  EXPECT_TRUE(bad(c));
  c = Open();
  c.tcp_port = 0;
  EXPECT_TRUE(bad(c));
  c = Open();
  c.capacity = 3 * 4096;  // not a power of two
  EXPECT_TRUE(bad(c));
  c = Open();
  c.capacity = 2048;  // below 4 KiB
  EXPECT_TRUE(bad(c));
  c = Open();
  c.ring_addr = ~0ull - 100;  // wraps
  EXPECT_TRUE(bad(c));
  c = Open();
  c.ring_addr = 0;
  EXPECT_TRUE(bad(c));
  c = Accept();
  c.to_slot = 64;  // beyond our own offer
  c.from_slot = 3;
  EXPECT_TRUE(bad(c));
  c = Accept();
  c.to_slot = 3;
  c.from_slot = 3;
  EXPECT_FALSE(bad(c));
  Control d;
  d.op = ControlOp::kDecline;
  d.to_slot = 3;  // cause 0
  EXPECT_TRUE(bad(d));
  d.cause = 1;
  d.rkey = 5;  // a decline carries no ring
  EXPECT_TRUE(bad(d));
  Control k;
  k.op = ControlOp::kCancel;
  k.from_slot = 3;
  k.to_slot = 3;  // a cancel names only the client's slot
  EXPECT_TRUE(bad(k));
}

TEST(LinkWireTest, ImmediatesCarryTypeSlotAndValue) {
  LinkImm out;
  ASSERT_TRUE(DecodeLinkImm(MakeLinkImm(kImmData, 4095, kMaxImmCount), 4096, &out));
  EXPECT_EQ(out.type, kImmData);
  EXPECT_EQ(out.slot, 4095);
  EXPECT_EQ(out.value, kMaxImmCount);
  ASSERT_TRUE(DecodeLinkImm(MakeLinkImm(kImmCredit, 0, 1), 1, &out));
  EXPECT_EQ(out.type, kImmCredit);
  EXPECT_EQ(out.slot, 0);
  EXPECT_EQ(out.value, 1u);
  for (uint32_t v : {kCtlFin, kCtlClose, kCtlNop, kCtlReset}) {
    ASSERT_TRUE(DecodeLinkImm(MakeLinkImm(kImmControl, 9, v), 10, &out));
    EXPECT_EQ(out.value, v);
  }
  EXPECT_EQ(kMaxImmCount, 262143u);
}

TEST(LinkWireTest, ImmediatesRejectWhatAPeerNeverSends) {
  LinkImm out;
  EXPECT_FALSE(DecodeLinkImm(MakeLinkImm(kImmData, 10, 5), 10, &out));  // slot
  EXPECT_FALSE(DecodeLinkImm((3u << 30) | 5, 4096, &out));               // type 3
  EXPECT_FALSE(DecodeLinkImm(MakeLinkImm(kImmControl, 1, 0), 4096, &out));
  EXPECT_FALSE(DecodeLinkImm(MakeLinkImm(kImmControl, 1, 5), 4096, &out));
  EXPECT_FALSE(DecodeLinkImm(MakeLinkImm(kImmData, 1, 0), 4096, &out));
}

}  // namespace
}  // namespace vsocket::rdma::link
