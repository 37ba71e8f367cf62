#include "vsocket/local_port.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <random>
#include <string>

#include "base/real_libc.h"
#include "base/small_file.h"

namespace vsocket {
namespace {

// Random ports tried: first in bind()'s half of the range, then anywhere.
// With half of the range taken, all fail about once in 4 billion
// connections; with 85% taken (thousands of connections a second for a
// minute), 99 in 100 still get one.  A taken port costs one bind call.
constexpr int kBindHalfTries = 24;
constexpr int kRandomTries = 32;

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

bool ParseNumber(std::string_view* text, uint16_t* out) {
  uint32_t value = 0;
  size_t i = 0;
  while (i < text->size() && (*text)[i] >= '0' && (*text)[i] <= '9' && i < 6)
    value = value * 10 + static_cast<uint32_t>((*text)[i++] - '0');
  if (i == 0 || value > 65535) return false;
  *out = static_cast<uint16_t>(value);
  text->remove_prefix(i);
  return true;
}

void SkipBlanks(std::string_view* text) {
  while (!text->empty() && (text->front() == ' ' || text->front() == '\t' ||
                            text->front() == '\n'))
    text->remove_prefix(1);
}

// The whole of a small /proc file, or "" if unreadable.
std::string ProcFile(const char* path) {
  std::string text;
  int err = 0;
  if (!sys::ReadSmallFile(path, 64 * 1024, &text, &err)) return "";
  return text;
}

// The network namespace's range and reserved ports.  Re-read at most once a
// second: an administrator's change, or a process that moved to another
// network namespace (unshare, setns), is followed within that second.
struct EphemeralPorts {
  PortSpan range{32768, 60999};
  std::vector<PortSpan> reserved;

  bool Reserved(uint16_t port) const {
    for (const PortSpan& s : reserved)
      if (port >= s.first && port <= s.second) return true;
    return false;
  }
};

int64_t NowSeconds() {
  struct timespec now;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return now.tv_sec;
}

EphemeralPorts ReadPorts() {
  EphemeralPorts ports;
  PortSpan range;
  if (ParseLocalPortRange(ProcFile("/proc/sys/net/ipv4/ip_local_port_range"),
                          &range)) {
    ports.range = range;
  }
  std::vector<PortSpan> reserved;
  if (ParseReservedPorts(ProcFile("/proc/sys/net/ipv4/ip_local_reserved_ports"),
                         &reserved)) {
    ports.reserved = std::move(reserved);
  }
  return ports;
}

// Never waits: a thread that finds the cache busy (or a forked child whose
// parent held it at fork) reads the files itself.
EphemeralPorts CurrentPorts() {
  static std::mutex* mutex = new std::mutex();  // never destroyed: atexit
  static EphemeralPorts* cached = nullptr;
  static int64_t read_at = -1;
  std::unique_lock<std::mutex> lock(*mutex, std::try_to_lock);
  if (!lock.owns_lock()) return ReadPorts();
  int64_t now = NowSeconds();
  if (cached == nullptr || now != read_at) {
    if (cached == nullptr) cached = new EphemeralPorts();
    *cached = ReadPorts();
    read_at = now;
  }
  return *cached;
}

// A random port of `range`; with `bind_half`, one of the parity opposite
// to the range's first port: the kernel's connect() fills the ports of that
// first port's parity first and bind(0) the others, so that binds and
// connects keep out of each other's way.
uint16_t RandomPortIn(const PortSpan& range, bool bind_half) {
  // Per thread; a forked child repeats its parent's draws, which costs a
  // taken port's retry at worst.
  thread_local std::minstd_rand random([] {
    struct timespec now;
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint32_t>(now.tv_nsec) ^ static_cast<uint32_t>(now.tv_sec) ^
           (static_cast<uint32_t>(::getpid()) << 12);
  }());
  uint32_t span = uint32_t{range.second} - range.first + 1;
  if (bind_half && span >= 4)
    return static_cast<uint16_t>(range.first + 2 * (random() % (span / 2)) + 1);
  return static_cast<uint16_t>(range.first + random() % span);
}

bool SetsReuse(int fd) {
  for (int name : {SO_REUSEADDR, SO_REUSEPORT}) {
    int on = 0;
    socklen_t len = sizeof(on);
    if (sys::getsockopt(fd, SOL_SOCKET, name, &on, &len) != 0 || on != 0) return true;
  }
  return false;
}

int BindWildcard(int fd, int family, uint16_t port) {
  struct sockaddr_storage any {};
  socklen_t any_len;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<struct sockaddr_in6*>(&any);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(port);
    any_len = sizeof(*in6);
  } else {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&any);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(port);
    any_len = sizeof(*in);
  }
  return sys::bind(fd, reinterpret_cast<struct sockaddr*>(&any), any_len);
}

// When the last LastResortPort found no port (CLOCK_MONOTONIC_COARSE
// seconds), or -1.
std::atomic<int64_t> g_last_resort_failed{-1};

// The random tries missed: most of the range is taken (ten thousand
// connections bound), but a port may be left.  bind(0), the kernel's own
// scan, finds one if there is any, for a scan's time (milliseconds with
// thousands of TIME_WAIT ports; it happens to a connection once its 32
// random tries failed).  Only when it finds none does the connection keep
// kernel TCP, and then none scans again within that second: a range full of
// TIME_WAIT, where connect() does better, costs a scan a second, not one a
// connection.
uint16_t LastResortPort(int fd, int family, const PortNames* names) {
  int64_t now = NowSeconds();
  if (g_last_resort_failed.load(std::memory_order_relaxed) == now) return 0;
  if (BindWildcard(fd, family, 0) != 0) {
    if (errno == EADDRINUSE) g_last_resort_failed.store(now, std::memory_order_relaxed);
    return 0;
  }
  uint16_t port = PortOf(fd);
  // The kernel's port may still carry a provider's name: busy all the same.
  if (port != 0 && names && names->held(port, names->context)) return 0;
  return port;
}

}  // namespace

bool ParseLocalPortRange(std::string_view text, PortSpan* range) {
  SkipBlanks(&text);
  uint16_t low, high;
  if (!ParseNumber(&text, &low)) return false;
  SkipBlanks(&text);
  if (!ParseNumber(&text, &high)) return false;
  SkipBlanks(&text);
  if (!text.empty() || low == 0 || low > high) return false;
  *range = {low, high};
  return true;
}

bool ParseReservedPorts(std::string_view text, std::vector<PortSpan>* spans) {
  std::vector<PortSpan> out;
  SkipBlanks(&text);
  while (!text.empty()) {
    uint16_t low, high;
    if (!ParseNumber(&text, &low)) return false;
    high = low;
    if (!text.empty() && text.front() == '-') {
      text.remove_prefix(1);
      if (!ParseNumber(&text, &high) || high < low) return false;
    }
    out.emplace_back(low, high);
    SkipBlanks(&text);
    if (!text.empty()) {
      if (text.front() != ',') return false;
      text.remove_prefix(1);
    }
  }
  *spans = std::move(out);
  return true;
}

uint16_t EnsureLocalPort(int fd, int family, const PortNames* names) {
  uint16_t port = PortOf(fd);
  if (port != 0) return port;
  if (SetsReuse(fd)) {
    if (BindWildcard(fd, family, 0) != 0) return 0;
    return PortOf(fd);
  }
  const EphemeralPorts ports = CurrentPorts();
  for (int i = 0; i < kRandomTries; ++i) {
    uint16_t candidate = RandomPortIn(ports.range, i < kBindHalfTries);
    if (ports.Reserved(candidate)) continue;
    if (names && names->held(candidate, names->context)) continue;
    if (BindWildcard(fd, family, candidate) == 0) return candidate;
    // Taken (a socket or a TIME_WAIT on it, a listener): try another.
    // Anything else (the socket got bound meanwhile, EACCES) ends here.
    if (errno != EADDRINUSE) return PortOf(fd);
  }
  return LastResortPort(fd, family, names);
}

}  // namespace vsocket
