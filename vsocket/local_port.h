// The client's own TCP port, known before the SYN: providers name their
// offers and handshakes after it.
//
// Why not bind(port 0): that asks the kernel for a port no socket uses at
// all, TIME_WAIT ones included, and the kernel gives bind() one half of the
// ephemeral range (connect() the other).  A client that made thousands of
// connections in the last minute fills that half with TIME_WAIT, and each
// bind(0) then scans it: 6 ms a call with 16,000 of them (docs/BENCHMARKS.md).
// connect()'s own choice (unique by address and port pair, and allowed to
// reuse a TIME_WAIT port) is made too late for an offer.  So random ports of
// the range are tried directly (one hash bucket each, microseconds); when
// all of those are taken, bind(0) looks for one that is left (at most one
// fruitless scan a second), and only when it finds none does the
// connection keep kernel TCP (`local_ports_busy`).
#ifndef VSOCKET_VSOCKET_LOCAL_PORT_H_
#define VSOCKET_VSOCKET_LOCAL_PORT_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace vsocket {

// A provider's names for a port: a port whose name is still held is not
// picked.  The shared-memory offer named after a connection lives until
// both ends closed, and the client's close resets TCP (no TIME_WAIT): its
// port is free again while the server has not closed yet.
struct PortNames {
  // True while a name for `port` exists.  Called before the bind (after
  // it for bind(0)'s port).
  bool (*held)(uint16_t port, const void* context);
  const void* context;
};

// REQUIRES: fd is an unconnected AF_INET/AF_INET6 stream socket of
// `family`.  Binds an ephemeral port (wildcard address) if the application
// did not bind one: a random free port of ip_local_port_range outside
// ip_local_reserved_ports whose `names` (if given) are not held, or
// bind(0)'s choice when no random try found one; or the kernel's choice
// when the application set SO_REUSEADDR/SO_REUSEPORT (a direct bind could
// then share a port with a connection to the same peer, and the connect
// would fail).  Returns the local port, or 0 when none was free or the bind
// failed (the socket may then be bound: to bind(0)'s port whose name is
// held).
// Thread-safe.
uint16_t EnsureLocalPort(int fd, int family, const PortNames* names = nullptr);

// ---- Parsing, exposed for tests ----
using PortSpan = std::pair<uint16_t, uint16_t>;  // inclusive
// "32768\t60999\n" (ip_local_port_range).  False if malformed or empty.
bool ParseLocalPortRange(std::string_view text, PortSpan* range);
// "8080,9000-9010\n" or "\n" (ip_local_reserved_ports).  False if malformed.
bool ParseReservedPorts(std::string_view text, std::vector<PortSpan>* spans);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_LOCAL_PORT_H_
