// The two addresses of a new TCP connection, as the core already knows
// them, so that nobody asks the kernel again: accept() gets the peer's
// address with the connection, a listener bound to one address gives the
// local one, and connect() was handed the peer's.  Contract: a setup asks
// getsockname/getpeername at most once per side, only for an address this
// object does not hold (the shared-memory claim and the live page both read
// it here), because a kernel TCP setup costs about twenty system calls.
//
// A value type, filled by one thread (the one in accept() or connect()) and
// read during that call only.  An address not known is empty (len 0):
// whoever needs it asks the kernel (NameLocal, NamePeer).
#ifndef VSOCKET_VSOCKET_CONNECTION_ENDPOINTS_H_
#define VSOCKET_VSOCKET_CONNECTION_ENDPOINTS_H_

#include <sys/socket.h>

#include <cstring>

namespace vsocket {

struct ConnectionEndpoints {
  struct sockaddr_storage local {};
  socklen_t local_len = 0;  // 0: not known
  struct sockaddr_storage peer {};
  socklen_t peer_len = 0;  // 0: not known

  const struct sockaddr* local_sa() const {
    return reinterpret_cast<const struct sockaddr*>(&local);
  }
  const struct sockaddr* peer_sa() const {
    return reinterpret_cast<const struct sockaddr*>(&peer);
  }
  void SetLocal(const struct sockaddr* sa, socklen_t len) { Copy(sa, len, &local, &local_len); }
  void SetPeer(const struct sockaddr* sa, socklen_t len) { Copy(sa, len, &peer, &peer_len); }

  // Fill the address from the kernel if it is not known yet (one
  // getsockname / getpeername on `tcp_fd`).  False if it stays unknown.
  bool NameLocal(int tcp_fd);
  bool NamePeer(int tcp_fd);

 private:
  static void Copy(const struct sockaddr* sa, socklen_t len,
                   struct sockaddr_storage* to, socklen_t* to_len) {
    if (!sa || len == 0 || len > sizeof(*to)) {
      *to_len = 0;
      return;
    }
    std::memcpy(to, sa, len);
    *to_len = len;
  }
};

// A listener's bound address, when every connection it accepts has it as
// its local address: an IPv4 or IPv6 address that is not the wildcard.
bool IsSpecificAddress(const struct sockaddr* sa, socklen_t len);

// The peer a connect() to `addr` reached, as getpeername() names it, when
// `addr` is one host.  The wildcard (0.0.0.0, ::) stays unknown: the kernel
// turns it into the socket's own address, or loopback.
void PeerOfConnect(const struct sockaddr* addr, socklen_t len,
                   ConnectionEndpoints* ends);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_CONNECTION_ENDPOINTS_H_
