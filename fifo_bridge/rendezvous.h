// How two vsocket processes on one host find each other without a daemon and
// without writing a byte into the TCP stream (see docs/PROTOCOL.md):
//  - A listening vsocket binds a "listener marker": an abstract Unix stream
//    socket named after its TCP address.  Abstract names are per network
//    namespace, so finding one proves the same host and namespace.
//  - A connecting vsocket probes the marker of its destination.  The probe's
//    SO_PEERCRED tells the listener's uid.
//  - The connection key (server address + client port) names the offer's
//    segment and doorbells for that one connection.
#ifndef VSOCKET_FIFO_BRIDGE_RENDEZVOUS_H_
#define VSOCKET_FIFO_BRIDGE_RENDEZVOUS_H_

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <string>

namespace vsocket::fifo {

// An IPv4/IPv6 TCP endpoint in canonical text form (IPv4-mapped IPv6
// addresses become IPv4; the wildcard address becomes "*").
struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};

// False for anything but AF_INET / AF_INET6.
bool EndpointFromSockaddr(const struct sockaddr* addr, socklen_t len,
                          Endpoint* out);

// Fills `addr` with the abstract-namespace Unix address "\0<name>" (cut to
// fit sun_path) and returns its length.  Every vsocket rendezvous name
// (markers, doorbells, offer hand-outs) is one of these.
socklen_t AbstractAddress(const std::string& name, struct sockaddr_un* addr);

// "vsk1/P/<pidns>/<pid>": the abstract name of the wake socket
// (fifo_bridge/liveness_watcher.h) of process `pid` of this process's PID
// namespace (<pidns> in hex: base/pid_namespace.h).  Processes of other
// PID namespaces on the same network namespace number theirs apart, so a
// pid of theirs never takes the name of one of ours.
std::string WakeSocketName(pid_t pid);

// File- and socket-name-safe key of one connection.
std::string ConnectionKey(const Endpoint& server, uint16_t client_port);

// Binds the marker for a listening socket bound to `bound`.  Returns the
// marker descriptor (close-on-exec, non-blocking) or -errno.
int OpenListenerMarker(const Endpoint& bound);
// Accepts and closes probes queued on a marker (never blocks).
void DrainListenerMarker(int marker_fd);
// True when `fd` is a listening Unix stream socket bound to a marker's
// name (an inherited marker, before it is trusted).
bool IsListenerMarker(int fd);

struct ProbeResult {
  bool found = false;
  uid_t uid = 0;
  pid_t pid = 0;
};
// Looks for a vsocket listener for `dst` in this network namespace: the
// exact address first, then the wildcard one.
ProbeResult ProbeListener(const Endpoint& dst);

// True when `ip` (canonical form) is an address of this host's namespace.
// Results are cached per address.
bool IsLocalAddress(const Endpoint& dst, int family);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_RENDEZVOUS_H_
