// Which fabric carries a connection: an index into the stats tables.
//
// The core knows one kind by name, kernel TCP (kTcp = 0).  Every other kind
// belongs to a transport provider (vsocket/transport_provider.h), which
// defines its own constant in its own folder (fifo_bridge: 1, rdma_backend:
// 2, toe_backend: 3) and registers it with its name; the registry refuses
// two providers of one kind.  TransportKindName() asks the registry, so the
// core never spells a fabric's name.
#ifndef VSOCKET_VSOCKET_TRANSPORT_KIND_H_
#define VSOCKET_VSOCKET_TRANSPORT_KIND_H_

#include <cstdint>

namespace vsocket {

enum class TransportKind : uint8_t { kTcp = 0 };

// Kinds the stats tables have room for (kTcp included).
inline constexpr int kMaxTransportKinds = 8;

inline constexpr int KindIndex(TransportKind kind) {
  return static_cast<int>(kind);
}

// "tcp", or the registered provider's name; "unknown" for a kind no
// provider registered (never another kind's name).
const char* TransportKindName(TransportKind kind);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TRANSPORT_KIND_H_
