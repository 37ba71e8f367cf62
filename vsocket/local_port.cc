#include "vsocket/local_port.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include "base/real_libc.h"

namespace vsocket {
namespace {

uint16_t PortOf(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&ss), &len) != 0)
    return 0;
  if (ss.ss_family == AF_INET && len >= sizeof(sockaddr_in))
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6 && len >= sizeof(sockaddr_in6))
    return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

uint16_t EnsureLocalPort(int fd, int family) {
  uint16_t port = PortOf(fd);
  if (port != 0) return port;
  struct sockaddr_storage any {};
  socklen_t any_len;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<struct sockaddr_in6*>(&any);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    any_len = sizeof(*in6);
  } else {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&any);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    any_len = sizeof(*in);
  }
  if (sys::bind(fd, reinterpret_cast<struct sockaddr*>(&any), any_len) != 0)
    return 0;
  return PortOf(fd);
}

}  // namespace vsocket
