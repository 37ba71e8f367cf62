// What crosses the wire besides payload bytes: the connection hello carried
// in RDMA CM private data, and the 32-bit immediates of RDMA WRITE WITH IMM.
//
// Everything decoded here comes from the peer and is untrusted; the Decode*
// functions validate and never trust a length, address or capacity blindly.
#ifndef VSOCKET_RDMA_BACKEND_WIRE_FORMAT_H_
#define VSOCKET_RDMA_BACKEND_WIRE_FORMAT_H_

#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fifo_bridge/ring_layout.h"

namespace vsocket::rdma {

inline constexpr uint32_t kHelloMagic = 0x56534b52;  // "VSKR"
inline constexpr uint16_t kHelloVersion = 1;
// Largest receive ring we accept from a peer (bounds our bounce buffer) and
// advertise.  Also keeps every byte count below 2^30 for the immediates.
inline constexpr uint64_t kMaxRingCapacity = 64ull << 20;

// Sent by each side: where the peer must RDMA-WRITE (the data area of the
// sender's receive ring, fifo_bridge layout), with which rkey, and how big
// that data area is.  Little-endian on the wire; 32 bytes (fits the 56-byte
// private data of an IB/RoCE REQ).
// Layout: magic u32 @0, version u16 @4, tcp_port u16 @6, rkey u32 @8,
// (zero: a decline's cause, below) @12, ring_data_addr u64 @16,
// capacity u64 @24.
struct Hello {
  uint64_t ring_data_addr = 0;
  uint32_t rkey = 0;
  uint64_t capacity = 0;
  // Client only: the local port of the kernel TCP connection this channel
  // will be paired with (vsocket negotiation, docs/PROTOCOL.md section 5);
  // 0 for a bare channel.  The server sends 0.
  uint16_t tcp_port = 0;
};
inline constexpr size_t kHelloBytes = 32;

inline void EncodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  uint32_t magic = htole32(kHelloMagic);
  uint16_t version = htole16(kHelloVersion);
  uint16_t tcp_port = htole16(h.tcp_port);
  uint32_t rkey = htole32(h.rkey);
  uint64_t addr = htole64(h.ring_data_addr);
  uint64_t cap = htole64(h.capacity);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &tcp_port, 2);
  std::memcpy(out + 8, &rkey, 4);
  std::memcpy(out + 16, &addr, 8);
  std::memcpy(out + 24, &cap, 8);
}

// Returns false if `len` is short or any field is impossible.
inline bool DecodeHello(const void* data, size_t len, Hello* h) {
  if (data == nullptr || len < kHelloBytes) return false;
  const auto* in = static_cast<const uint8_t*>(data);
  uint32_t magic, rkey;
  uint16_t version, tcp_port;
  uint64_t addr, cap;
  std::memcpy(&magic, in + 0, 4);
  std::memcpy(&version, in + 4, 2);
  std::memcpy(&tcp_port, in + 6, 2);
  std::memcpy(&rkey, in + 8, 4);
  std::memcpy(&addr, in + 16, 8);
  std::memcpy(&cap, in + 24, 8);
  h->ring_data_addr = le64toh(addr);
  h->rkey = le32toh(rkey);
  h->capacity = le64toh(cap);
  h->tcp_port = le16toh(tcp_port);
  if (le32toh(magic) != kHelloMagic || le16toh(version) != kHelloVersion) {
    return false;
  }
  if (!fifo::IsValidCapacity(h->capacity) || h->capacity > kMaxRingCapacity) {
    return false;
  }
  if (h->ring_data_addr == 0 ||
      h->ring_data_addr + h->capacity < h->ring_data_addr) {
    return false;
  }
  return true;
}

// A DECLINE says "I am vsocket, but this connection uses TCP for a reason
// of mine" (a memory limit), so that the peer names that reason instead of
// peer_not_vsocket.  A client sends it, before its SYN, as the private data
// of a connection request that the server records and always rejects; a
// server sends it as the private data of its rejection.  It is a hello of
// the same magic and version with rkey, ring_data_addr and capacity zero
// and a nonzero cause (u8) at offset 12, the byte a hello leaves zero (a
// server's has tcp_port 0).  Compatibility: a server without this rule
// finds capacity 0 invalid and rejects the request as well, and a client
// without it ignores a rejection's private data: both still end on TCP,
// only naming peer_not_vsocket.  A cause this version does not know still
// decodes (reported as peer_declined_rdma).
enum class DeclineCause : uint8_t {
  kNone = 0,         // not a decline (every hello)
  kMemoryLimit = 1,  // the sender's rdma_memory_limit
};

inline void EncodeDecline(uint16_t tcp_port, DeclineCause cause,
                          uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  uint32_t magic = htole32(kHelloMagic);
  uint16_t version = htole16(kHelloVersion);
  uint16_t port = htole16(tcp_port);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &port, 2);
  out[12] = static_cast<uint8_t>(cause);
}

// True if `data` is a decline: *tcp_port and *cause (nonzero, possibly a
// cause this version does not know) are set.  A hello is never a decline.
inline bool DecodeDecline(const void* data, size_t len, uint16_t* tcp_port,
                          uint8_t* cause) {
  if (data == nullptr || len < kHelloBytes) return false;
  const auto* in = static_cast<const uint8_t*>(data);
  uint32_t magic;
  uint16_t version, port;
  std::memcpy(&magic, in + 0, 4);
  std::memcpy(&version, in + 4, 2);
  std::memcpy(&port, in + 6, 2);
  if (le32toh(magic) != kHelloMagic || le16toh(version) != kHelloVersion ||
      in[12] == 0) {
    return false;
  }
  for (size_t i : {8, 9, 10, 11, 13, 14, 15}) {
    if (in[i] != 0) return false;
  }
  for (size_t i = 16; i < kHelloBytes; ++i) {
    if (in[i] != 0) return false;  // ring address and capacity: none
  }
  *tcp_port = le16toh(port);
  *cause = in[12];
  return true;
}

// Immediates (host order here; htonl'd on the wire): top 2 bits = type,
// low 30 bits = value.
//   kImmData:    value = payload bytes this write (and any plain RDMA WRITE
//                just before it) appended to the receiver's ring.
//   kImmCredit:  value = bytes the sender of the credit consumed from its
//                receive ring since its previous credit.
//   kImmControl: value = kCtlFin (no more data) or kCtlClose (no more data
//                and nothing more will be read: further sends get EPIPE)
//                or kCtlNop (ignored; lets the sender signal a marker WR).
inline constexpr uint32_t kImmData = 0u << 30;
inline constexpr uint32_t kImmCredit = 1u << 30;
inline constexpr uint32_t kImmControl = 2u << 30;
inline constexpr uint32_t kImmTypeMask = 3u << 30;
inline constexpr uint32_t kImmValueMask = (1u << 30) - 1;
inline constexpr uint32_t kCtlFin = 1;
inline constexpr uint32_t kCtlClose = 2;
inline constexpr uint32_t kCtlNop = 3;  // completion marker, ignored

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_WIRE_FORMAT_H_
