#include "fifo_bridge/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include "base/pid_namespace.h"
#include "base/real_libc.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

constexpr char kMarkerPrefix[] = "vsk1/L/";

socklen_t MarkerAddress(const std::string& ip, uint16_t port,
                        struct sockaddr_un* addr) {
  return AbstractAddress(kMarkerPrefix + ip + ":" + std::to_string(port), addr);
}

int SocketOption(int fd, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  if (sys::getsockopt(fd, SOL_SOCKET, name, &value, &len) != 0) return -1;
  return value;
}

bool ProbeOne(const std::string& ip, uint16_t port, ProbeResult* result) {
  struct sockaddr_un addr;
  socklen_t len = MarkerAddress(ip, port, &addr);
  int fd = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool found = false;
  if (sys::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), len) == 0) {
    struct ucred cred;
    socklen_t cred_len = sizeof(cred);
    if (sys::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0) {
      result->found = found = true;
      result->uid = cred.uid;
      result->pid = cred.pid;
    }
  }
  sys::close(fd);
  return found;
}

}  // namespace

socklen_t AbstractAddress(const std::string& name, struct sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

bool EndpointFromSockaddr(const struct sockaddr* addr, socklen_t len,
                          Endpoint* out) {
  char text[INET6_ADDRSTRLEN];
  if (len < sizeof(sa_family_t)) return false;  // not even the family
  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    auto* in = reinterpret_cast<const struct sockaddr_in*>(addr);
    out->port = ntohs(in->sin_port);
    if (in->sin_addr.s_addr == htonl(INADDR_ANY)) {
      out->ip = "*";
    } else {
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      out->ip = text;
    }
    return true;
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(addr);
    out->port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
      out->ip = "*";
    } else if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
      out->ip = text;
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      out->ip = text;
    }
    return true;
  }
  return false;
}

std::string ConnectionKey(const Endpoint& server, uint16_t client_port) {
  std::string key = "c-" + server.ip + "-" + std::to_string(server.port) +
                    "-" + std::to_string(client_port);
  for (char& c : key) {
    if (c == ':' || c == '/') c = '_';
  }
  return key;
}

int OpenListenerMarker(const Endpoint& bound) {
  struct sockaddr_un addr;
  socklen_t len = MarkerAddress(bound.ip, bound.port, &addr);
  int fd = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (sys::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), len) != 0 ||
      sys::listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    sys::close(fd);
    return -err;
  }
  return sys::MovePrivate(fd);
}

bool IsListenerMarker(int fd) {
  constexpr size_t kPrefixLen = sizeof(kMarkerPrefix) - 1;
  struct sockaddr_un addr {};
  socklen_t len = sizeof(addr);
  return SocketOption(fd, SO_DOMAIN) == AF_UNIX &&
         SocketOption(fd, SO_TYPE) == SOCK_STREAM &&
         SocketOption(fd, SO_ACCEPTCONN) == 1 &&
         sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) == 0 &&
         len >= offsetof(struct sockaddr_un, sun_path) + 1 + kPrefixLen &&
         addr.sun_path[0] == '\0' &&
         std::memcmp(addr.sun_path + 1, kMarkerPrefix, kPrefixLen) == 0;
}

void DrainListenerMarker(int marker_fd) {
  for (int i = 0; i < 1024; ++i) {
    int fd = sys::accept4(marker_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    sys::close(fd);
  }
}

ProbeResult ProbeListener(const Endpoint& dst) {
  ProbeResult result;
  if (!ProbeOne(dst.ip, dst.port, &result)) ProbeOne("*", dst.port, &result);
  return result;
}

bool IsLocalAddress(const Endpoint& dst, int family) {
  static std::mutex mutex;
  static std::unordered_map<std::string, bool> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(dst.ip);
    if (it != cache.end()) return it->second;
  }
  // Binding a datagram socket to an address succeeds only for local ones.
  bool local = false;
  struct sockaddr_storage ss {};
  socklen_t len = 0;
  bool is_v4 = dst.ip.find(':') == std::string::npos;
  if (is_v4) {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    local = inet_pton(AF_INET, dst.ip.c_str(), &in->sin_addr) == 1;
    len = sizeof(*in);
  } else {
    auto* in6 = reinterpret_cast<struct sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    local = inet_pton(AF_INET6, dst.ip.c_str(), &in6->sin6_addr) == 1;
    len = sizeof(*in6);
  }
  (void)family;
  if (local) {
    int fd = sys::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    local = fd >= 0 &&
            sys::bind(fd, reinterpret_cast<struct sockaddr*>(&ss), len) == 0;
    if (fd >= 0) sys::close(fd);
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() < 256) cache.emplace(dst.ip, local);
  return local;
}

std::string WakeSocketName(pid_t pid) {
  return "vsk1/P/" + sys::PidNamespaceTag() + "/" + std::to_string(static_cast<long>(pid));
}

}  // namespace vsocket::fifo
