// What crosses a link (docs/PROTOCOL.md 6.5; rdma_backend/README.md
// "Links"): the link hello in each QP's CM private data (version 2), the
// 32-byte control messages sent with SEND (OPEN / ACCEPT / DECLINE /
// CANCEL), and the immediates that carry the receiver's slot.
//
// Everything decoded here comes from the peer and is untrusted: every
// Decode* checks lengths, reserved bytes and ranges and returns false on
// anything a vsocket peer would never send.  Stateless; any thread.
#ifndef VSOCKET_RDMA_BACKEND_LINK_WIRE_H_
#define VSOCKET_RDMA_BACKEND_LINK_WIRE_H_

#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fifo_bridge/ring_layout.h"
#include "rdma_backend/wire_format.h"

namespace vsocket::rdma::link {

inline constexpr uint16_t kLinkHelloVersion = 2;
inline constexpr size_t kLinkHelloBytes = 32;  // fits the REQ's 56 bytes
inline constexpr uint8_t kMaxQpsPerLink = 4;
inline constexpr uint32_t kMaxSlots = 4096;    // 12 bits of an immediate
inline constexpr uint16_t kNoSlot = 0xffff;

struct LinkHello {
  uint8_t qp_index = 0;   // < qp_count
  uint8_t qp_count = 1;   // 1..kMaxQpsPerLink
  uint16_t slots = 0;     // offered, 1..kMaxSlots
  uint64_t link_id = 0;   // nonzero
};

namespace detail {
inline void Put16(uint8_t* p, uint16_t v) { v = htole16(v); std::memcpy(p, &v, 2); }
inline void Put32(uint8_t* p, uint32_t v) { v = htole32(v); std::memcpy(p, &v, 4); }
inline void Put64(uint8_t* p, uint64_t v) { v = htole64(v); std::memcpy(p, &v, 8); }
inline uint16_t Get16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return le16toh(v); }
inline uint32_t Get32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return le32toh(v); }
inline uint64_t Get64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return le64toh(v); }
// True if every byte of [from, to) is zero.
inline bool Zero(const uint8_t* p, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}
}  // namespace detail

inline void EncodeLinkHello(const LinkHello& h, uint8_t out[kLinkHelloBytes]) {
  std::memset(out, 0, kLinkHelloBytes);
  detail::Put32(out + 0, kHelloMagic);
  detail::Put16(out + 4, kLinkHelloVersion);
  out[6] = h.qp_index;
  out[7] = h.qp_count;
  detail::Put16(out + 8, h.slots);
  detail::Put64(out + 16, h.link_id);
}

// False if `len` is short, the magic or version differ (a version-1 hello
// is not a link hello), or a field is impossible.  Private data may be
// padded (IB: 56 bytes): bytes past kLinkHelloBytes are ignored.
inline bool DecodeLinkHello(const void* data, size_t len, LinkHello* h) {
  if (data == nullptr || len < kLinkHelloBytes) return false;
  const auto* in = static_cast<const uint8_t*>(data);
  if (detail::Get32(in + 0) != kHelloMagic ||
      detail::Get16(in + 4) != kLinkHelloVersion) {
    return false;
  }
  h->qp_index = in[6];
  h->qp_count = in[7];
  h->slots = detail::Get16(in + 8);
  h->link_id = detail::Get64(in + 16);
  return h->qp_count >= 1 && h->qp_count <= kMaxQpsPerLink &&
         h->qp_index < h->qp_count && h->slots >= 1 && h->slots <= kMaxSlots &&
         h->link_id != 0 && detail::Zero(in, 10, 16) &&
         detail::Zero(in, 24, kLinkHelloBytes);
}

// True if private data `data` names version 2 (a link hello, maybe
// invalid): the listener then decodes it with DecodeLinkHello, not
// DecodeHello.
inline bool IsLinkHelloVersion(const void* data, size_t len) {
  if (data == nullptr || len < 6) return false;
  const auto* in = static_cast<const uint8_t*>(data);
  return detail::Get32(in) == kHelloMagic &&
         detail::Get16(in + 4) == kLinkHelloVersion;
}

// ---- Control messages (SEND payloads, exactly kControlBytes) ----

inline constexpr size_t kControlBytes = 32;

enum class ControlOp : uint8_t {
  kOpen = 1,     // client -> server: a new connection
  kAccept = 2,   // server -> client: paired and parked
  kDecline = 3,  // server -> client: use TCP, for `cause`
  kCancel = 4,   // client -> server: gave up before ACCEPT arrived
};

enum class LinkDeclineCause : uint8_t {
  kMemory = 1,         // the server's memory limit
  kSlotsFull = 2,      // no free slot on the server's side
  kListenerGone = 3,   // the listener closed or its process forked
};

struct Control {
  ControlOp op = ControlOp::kOpen;
  uint8_t cause = 0;         // DECLINE only (a LinkDeclineCause, maybe unknown)
  uint16_t tcp_port = 0;     // OPEN only
  uint16_t to_slot = kNoSlot;
  uint16_t from_slot = kNoSlot;
  uint32_t rkey = 0;         // OPEN, ACCEPT: the sender's receive slice
  uint32_t capacity = 0;
  uint64_t ring_addr = 0;
};

inline void EncodeControl(const Control& c, uint8_t out[kControlBytes]) {
  std::memset(out, 0, kControlBytes);
  out[0] = static_cast<uint8_t>(c.op);
  out[1] = c.cause;
  detail::Put16(out + 2, c.tcp_port);
  detail::Put16(out + 4, c.to_slot);
  detail::Put16(out + 6, c.from_slot);
  detail::Put32(out + 8, c.rkey);
  detail::Put32(out + 12, c.capacity);
  detail::Put64(out + 16, c.ring_addr);
}

// False unless `len` is exactly kControlBytes and every field fits the op
// (PROTOCOL.md 6.5's table): slots below `slots` (the count this side
// offered for to_slot; the peer's offer bounds from_slot, `peer_slots`),
// OPEN/ACCEPT rings valid (power-of-two capacity in [4 KiB, 64 MiB], no
// address overflow), the other ops' ring fields zero.
inline bool DecodeControl(const void* data, size_t len, uint32_t slots,
                          uint32_t peer_slots, Control* c) {
  if (data == nullptr || len != kControlBytes) return false;
  const auto* in = static_cast<const uint8_t*>(data);
  c->op = static_cast<ControlOp>(in[0]);
  c->cause = in[1];
  c->tcp_port = detail::Get16(in + 2);
  c->to_slot = detail::Get16(in + 4);
  c->from_slot = detail::Get16(in + 6);
  c->rkey = detail::Get32(in + 8);
  c->capacity = detail::Get32(in + 12);
  c->ring_addr = detail::Get64(in + 16);
  if (!detail::Zero(in, 24, kControlBytes)) return false;
  const bool to_ok = c->to_slot < slots;
  const bool from_ok = c->from_slot < peer_slots;
  const bool ring_ok = fifo::IsValidCapacity(c->capacity) &&
                       c->capacity <= kMaxRingCapacity && c->ring_addr != 0 &&
                       c->ring_addr + c->capacity > c->ring_addr;
  const bool no_ring = c->rkey == 0 && c->capacity == 0 && c->ring_addr == 0;
  switch (c->op) {
    case ControlOp::kOpen:
      return c->cause == 0 && c->tcp_port != 0 && c->to_slot == kNoSlot &&
             from_ok && ring_ok;
    case ControlOp::kAccept:
      return c->cause == 0 && c->tcp_port == 0 && to_ok && from_ok && ring_ok;
    case ControlOp::kDecline:
      return c->cause != 0 && c->tcp_port == 0 && to_ok &&
             c->from_slot == kNoSlot && no_ring;
    case ControlOp::kCancel:
      return c->cause == 0 && c->tcp_port == 0 && c->to_slot == kNoSlot &&
             from_ok && no_ring;
  }
  return false;
}

// ---- Immediates on a link (host order; htonl'd on the wire) ----
// bits 31-30 type (wire_format.h's kImmData / kImmCredit / kImmControl;
// type 3 is invalid), 29-18 the receiver's slot, 17-0 value.
inline constexpr uint32_t kImmSlotShift = 18;
inline constexpr uint32_t kImmSlotMask = (kMaxSlots - 1) << kImmSlotShift;
inline constexpr uint32_t kLinkImmValueMask = (1u << kImmSlotShift) - 1;
// Largest DATA or CREDIT count one immediate carries.
inline constexpr uint32_t kMaxImmCount = kLinkImmValueMask;
inline constexpr uint32_t kCtlReset = 4;  // beside kCtlFin/kCtlClose/kCtlNop

// REQUIRES: type is kImmData, kImmCredit or kImmControl; slot < kMaxSlots;
//           value <= kMaxImmCount.
inline constexpr uint32_t MakeLinkImm(uint32_t type, uint32_t slot,
                                      uint32_t value) {
  return type | (slot << kImmSlotShift) | value;
}

struct LinkImm {
  uint32_t type = 0;   // kImmData, kImmCredit or kImmControl
  uint16_t slot = 0;
  uint32_t value = 0;
};

// False for type 3, a slot not below `slots` (what this side offered), a
// CONTROL value that is none of FIN/CLOSE/NOP/RESET, or a zero DATA count.
// (Counts against granted space are the connection's check: the link
// cannot know them.)
inline bool DecodeLinkImm(uint32_t imm, uint32_t slots, LinkImm* out) {
  out->type = imm & kImmTypeMask;
  out->slot = static_cast<uint16_t>((imm & kImmSlotMask) >> kImmSlotShift);
  out->value = imm & kLinkImmValueMask;
  if (out->type == (3u << 30) || out->slot >= slots) return false;
  if (out->type == kImmControl) {
    return out->value == kCtlFin || out->value == kCtlClose ||
           out->value == kCtlNop || out->value == kCtlReset;
  }
  return out->type == kImmCredit || out->value != 0;
}

}  // namespace vsocket::rdma::link

#endif  // VSOCKET_RDMA_BACKEND_LINK_WIRE_H_
