// The client's own TCP port, known before the SYN: providers name their
// offers and handshakes after it.
#ifndef VSOCKET_VSOCKET_LOCAL_PORT_H_
#define VSOCKET_VSOCKET_LOCAL_PORT_H_

#include <cstdint>

namespace vsocket {

// REQUIRES: fd is an unconnected AF_INET/AF_INET6 stream socket of
// `family`.  Binds an ephemeral port (wildcard address) if the application
// did not bind one.  Returns the local port, or 0 on failure.
uint16_t EnsureLocalPort(int fd, int family);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_LOCAL_PORT_H_
