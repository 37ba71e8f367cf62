// Which TCP connections to a listening port the kernel holds right now
// (SYN received, established, or closed by the peer but not yet accepted),
// read with one NETLINK_SOCK_DIAG dump per address family.
//
// The RDMA acceptor parks a channel for a TCP connection it expects
// (rdma_acceptor.h); this tells a connection that waits in the backlog for
// a slow accept() -- which must get its channel, as kernel TCP would
// accept it -- from a handshake whose TCP connection never came (a client
// that vanished or lied), whose channel must not be held for ever.
//
// Threads: any; no state.  Blocking: two short netlink round trips, at
// most the table of TCP sockets of this network namespace (the caller
// asks only for channels parked past a timeout, on a timer).
#ifndef VSOCKET_RDMA_BACKEND_BACKLOG_PROBE_H_
#define VSOCKET_RDMA_BACKEND_BACKLOG_PROBE_H_

#include <cstdint>
#include <set>
#include <string>

namespace vsocket::rdma {

// Adds to *remotes the peer "a.b.c.d:port" (IPv4, or IPv4-mapped IPv6
// written as IPv4; other IPv6 as "x:...:port") of every TCP socket whose
// local port is `local_port` (host order) and that is not listening.
// False (errno set) if the kernel would not answer: no conclusion then.
bool TcpPeersOfPort(uint16_t local_port, std::set<std::string>* remotes);

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_BACKLOG_PROBE_H_
