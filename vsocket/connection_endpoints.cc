#include "vsocket/connection_endpoints.h"

#include <netinet/in.h>

#include "base/real_libc.h"

namespace vsocket {

namespace {

// *to from `ask` (getsockname or getpeername) unless known already.
bool AskKernel(int tcp_fd, int (*ask)(int, struct sockaddr*, socklen_t*),
               struct sockaddr_storage* to, socklen_t* to_len) {
  if (*to_len != 0) return true;
  socklen_t len = sizeof(*to);
  if (ask(tcp_fd, reinterpret_cast<struct sockaddr*>(to), &len) != 0 || len > sizeof(*to))
    return false;
  *to_len = len;
  return true;
}

}  // namespace

bool ConnectionEndpoints::NameLocal(int tcp_fd) {
  return AskKernel(tcp_fd, sys::getsockname, &local, &local_len);
}

bool ConnectionEndpoints::NamePeer(int tcp_fd) {
  return AskKernel(tcp_fd, sys::getpeername, &peer, &peer_len);
}

bool IsSpecificAddress(const struct sockaddr* sa, socklen_t len) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
    return reinterpret_cast<const struct sockaddr_in*>(sa)->sin_addr.s_addr != htonl(INADDR_ANY);
  if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) return false;
    // ::ffff:0.0.0.0 is the IPv4 wildcard.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr32[3] == 0)
      return false;
    return true;
  }
  return false;
}

void PeerOfConnect(const struct sockaddr* addr, socklen_t len,
                   ConnectionEndpoints* ends) {
  if (IsSpecificAddress(addr, len)) {
    ends->SetPeer(addr, addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                   : sizeof(struct sockaddr_in6));
  }
}

}  // namespace vsocket
