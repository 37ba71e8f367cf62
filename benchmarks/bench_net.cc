#include "bench_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include <cstring>

#include "bench_socket_calls.h"
#include "vsocket/vsocket.h"

namespace vbench {

void throw_errno(const std::string& what) {
  int saved = errno;
  if (saved == EAGAIN || saved == EWOULDBLOCK)
    throw BenchError(what + ": timed out (peer silent longer than --io-timeout-ms)", saved);
  throw BenchError(what + ": " + strerror(saved), saved);
}

namespace {

// vsocket_socket for a blocking, close-on-exec TCP socket (nothing here
// execs; toe reads ahead only on close-on-exec sockets); see
// TransportUnavailable.
int open_socket(int family) {
  int fd = Sock().socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) return fd;
  int saved = errno;
  switch (saved) {
    case EINVAL:
    case EPROTONOSUPPORT:
    case ESOCKTNOSUPPORT:
    case EAFNOSUPPORT:
    case EOPNOTSUPP:
    case ENOSYS:
    case ENODEV:
      throw TransportUnavailable(
          std::string("socket: ") + strerror(saved), saved);
    default:
      throw_errno("socket");
  }
}

}  // namespace

PeerAddress resolve_peer(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0)
    throw BenchError("cannot resolve '" + host + "': " + gai_strerror(rc));
  PeerAddress peer;
  std::memcpy(&peer.storage, found->ai_addr, found->ai_addrlen);
  peer.length = found->ai_addrlen;
  freeaddrinfo(found);
  return peer;
}

int listen_on(const char* bind_ip, uint16_t port) {
  int fd = open_socket(AF_INET);
  try {
    int one = 1;
    if (Sock().setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
      throw_errno("setsockopt(SO_REUSEADDR)");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, bind_ip, &addr.sin_addr) != 1)
      throw BenchError(std::string("bad IPv4 bind address '") + bind_ip + "'");
    if (Sock().bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw_errno(std::string("bind ") + bind_ip + ":" +
                  std::to_string(port));
    if (Sock().listen(fd, 128) != 0) throw_errno("listen");
  } catch (...) {
    Sock().close(fd);
    throw;
  }
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (Sock().getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("getsockname");
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

int connect_to(const PeerAddress& peer, int io_timeout_ms) {
  int fd = open_socket(peer.storage.ss_family);
  try {
    set_io_timeout(fd, io_timeout_ms);  // Linux bounds connect by SO_SNDTIMEO
    const sockaddr* addr = reinterpret_cast<const sockaddr*>(&peer.storage);
    if (Sock().connect(fd, addr, peer.length) != 0) {
      // A blocking connect cut short by SO_SNDTIMEO reports EINPROGRESS.
      if (errno == EINPROGRESS)
        throw BenchError("connect: timed out", ETIMEDOUT);
      throw_errno("connect");
    }
  } catch (...) {
    Sock().close(fd);
    throw;
  }
  return fd;
}

void set_io_timeout(int fd, int timeout_ms) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  if (Sock().setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
    throw_errno("setsockopt(SO_RCVTIMEO)");
  if (Sock().setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
    throw_errno("setsockopt(SO_SNDTIMEO)");
}

void set_nodelay(int fd) {
  int one = 1;
  if (Sock().setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    throw_errno("setsockopt(TCP_NODELAY)");
}

void send_all(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = Sock().send(fd, p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("send");
    }
    p += n;
    len -= size_t(n);
  }
}

bool recv_all(int fd, void* buf, size_t len) {
  char* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < len) {
    size_t n = recv_some(fd, p + got, len - got);
    if (n == 0) {
      if (got == 0) return false;
      throw BenchError("recv: peer closed after " + std::to_string(got) +
                       " of " + std::to_string(len) + " bytes");
    }
    got += n;
  }
  return true;
}

size_t recv_some(int fd, void* buf, size_t len) {
  for (;;) {
    ssize_t n = Sock().recv(fd, buf, len, 0);
    if (n >= 0) return size_t(n);
    if (errno != EINTR) throw_errno("recv");
  }
}

void close_quietly(int fd) {
  if (fd >= 0) Sock().close(fd);
}

std::string transport_of(int fd) {
  if (KernelSockets()) return kKernelTransport;
  const char* name = vsocket_transport_name(fd);
  return name ? name : "";
}

std::string fallback_reason_of(int fd) {
  if (KernelSockets()) return "";
  const char* reason = vsocket_fallback_reason(fd);
  return reason ? reason : "";
}

}  // namespace vbench
