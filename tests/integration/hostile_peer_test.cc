// hostile_peer: a peer that shares a connection's segment (the same user may
// map it) and writes impossible ring indices, flags or sizes into it, or
// truncates the file.  The victim's next call on that connection must end
// with ECONNRESET (or EOF) within 1 s -- never a crash, a hang or a read
// outside the ring -- and its other connections must keep working.
//
// Each test forks a victim (the client: connections A... and B) and a hostile
// peer (the server) joined by a control socketpair; the gtest process never
// calls vsocket.  The peer finds A's segment as any process of the user
// could: the file its own claim unlinked is still open in /proc/self/fd,
// named /dev/shm/vsocket-<uid>/c-<ip>-<port>-<client port> (deleted).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_segment.h"
#include "child_check.h"
#include "clock.h"
#include "exact_io.h"
#include "forked_pair.h"
#include "loopback.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test::ControlPair;
using vsocket_test::g_role;
using vsocket_test::NowMs;
using vsocket_test_support::Loopback;

namespace fifo = vsocket::fifo;

using Ctl = ControlPair;

constexpr uint64_t kRing = 64 << 10;  // VSOCKET_RING_SIZE below

void Configure() {
  setenv("VSOCKET_TRANSPORT", "shm", 1);
  setenv("VSOCKET_RING_SIZE", "64K", 1);
  setenv("VSOCKET_CLAIM_TIMEOUT_MS", "10000", 1);
  setenv("VSOCKET_LOG", "error", 1);  // the resets are logged as warnings
}

int Listen(int* port) {
  return vsocket_test::ListenOn(vsocket_test::VsocketApi(), Loopback(0), port,
                                {.backlog = 16});
}

int Connect(int port) {
  int fd = vsocket_test::ConnectTo(vsocket_test::VsocketApi(), Loopback(port));
  const char* name = vsocket_transport_name(fd);
  CHECK(name && std::string(name) == "shm", "transport %s (%s)", name ? name : "null",
        vsocket_fallback_reason(fd));
  return fd;
}

void SetTimeout(int fd, int name, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  CHECK(vsocket_setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv)) == 0, "timeout");
}

// The victim's side of B: an echo round trip still works.
void ExpectEcho(int fd) {
  SetTimeout(fd, SO_RCVTIMEO, 3000);
  CHECK(vsocket_send(fd, "ping", 4, MSG_NOSIGNAL) == 4, "send on the healthy connection");
  char buf[4];
  vsocket_test::RecvAll(vsocket_test::VsocketApi(), fd, buf, 4);
  CHECK(std::memcmp(buf, "ping", 4) == 0, "echo content");
}

// The peer's side of B.
void Echo(int fd) {
  char buf[4];
  vsocket_test::RecvAll(vsocket_test::VsocketApi(), fd, buf, 4);
  CHECK(vsocket_send(fd, buf, 4, MSG_NOSIGNAL) == 4, "echo send");
}

// The hostile peer's view of one connection's segment: the file the name
// keeps, opened by its name (the connection key).
struct Segment {
  int fd = -1;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  uint64_t capacity = 0;
  bool pooled = false;  // a slice of a pool: fd is the whole pool's file

  // d: fifo::Direction's value (0 client->server, 1 server->client).
  fifo::RingControl* control(int d) const {
    size_t stride = (fifo::RingBytes(capacity) + 4095) / 4096 * 4096;
    return reinterpret_cast<fifo::RingControl*>(base + fifo::kSegmentHeaderBytes +
                                                d * stride);
  }
};

// Pools are on unless VSOCKET_SHM_POOL=0 (the nopool variants).
bool PoolsOn() {
  const char* v = getenv("VSOCKET_SHM_POOL");
  return v == nullptr || std::string(v) != "0";
}

Segment MapSegmentOf(int accepted_fd, int listen_port) {
  sockaddr_in peer = {};
  socklen_t len = sizeof(peer);
  CHECK(vsocket_getpeername(accepted_fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0,
        "getpeername");
  // The name lives as long as the connection (docs/PROTOCOL.md, section 2).
  std::string path = "/dev/shm/vsocket-" + std::to_string(geteuid()) + "/c-127.0.0.1-" +
                     std::to_string(listen_port) + "-" + std::to_string(ntohs(peer.sin_port));
  Segment s;
  // A pool's slice (the default; not VSOCKET_SHM_POOL=0) is named by a symlink:
  // "<pool>#<slice>#<generation>", the pool's name ending in -<capacity>.
  char target[256];
  ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  off_t offset = 0;
  if (n > 0) {
    target[n] = '\0';
    char* hash = strchr(target, '#');
    CHECK(hash != nullptr, "symlink text %s", target);
    *hash = '\0';
    unsigned long slice = strtoul(hash + 1, nullptr, 10);
    unsigned long long capacity = strtoull(strrchr(target, '-') + 1, nullptr, 10);
    size_t stride = (fifo::RingBytes(capacity) + 4095) / 4096 * 4096;
    s.bytes = fifo::kSegmentHeaderBytes + 2 * stride;
    offset = static_cast<off_t>(slice * s.bytes);
    path = "/dev/shm/vsocket-" + std::to_string(geteuid()) + "/" + target;
    s.pooled = true;
  }
  s.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  CHECK(s.fd >= 0, "open %s", path.c_str());
  struct stat st;
  CHECK(fstat(s.fd, &st) == 0, "fstat");
  CHECK(s.pooled == PoolsOn(), "pooled %d with VSOCKET_SHM_POOL %s", s.pooled,
        PoolsOn() ? "on" : "off");
  if (!s.pooled) s.bytes = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, offset);
  CHECK(p != MAP_FAILED, "mmap");
  s.base = static_cast<uint8_t*>(p);
  s.capacity = reinterpret_cast<fifo::SegmentHeader*>(s.base)->ring_capacity;
  CHECK(s.capacity == kRing, "capacity %llu", static_cast<unsigned long long>(s.capacity));
  return s;
}

// What the victim's next call on an attacked connection may return.
enum Expect : int64_t {
  kReset = 1,        // -1/ECONNRESET
  kResetOrEof = 2,   // that, or 0
  kDataOrEnd = 3,    // in-range indices: up to a ring of bytes, 0 or ECONNRESET
  kSendFails = 4,    // the victim's send: -1/ECONNRESET or EPIPE
};

// Checks the victim's next call on `fd` against `expect`, within 1 s.
void VictimCall(int fd, int64_t expect) {
  SetTimeout(fd, SO_RCVTIMEO, 3000);
  SetTimeout(fd, SO_SNDTIMEO, 3000);
  static char buf[kRing + 1];
  int64_t start = NowMs();
  errno = 0;
  ssize_t n;
  if (expect == kSendFails) {
    // The producer reads the consumer's tail again only when the tail it
    // read last leaves less than half the ring free (spsc_ring.h), so the
    // bad tail must stop the victim within half a ring of sends.
    size_t sent = 0;
    do {
      n = vsocket_send(fd, buf, 4096, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    } while (n > 0 && sent <= kRing / 2 + 4096);  // one send past half
  } else {
    n = vsocket_recv(fd, buf, sizeof(buf), 0);
  }
  int err = errno;
  int64_t took = NowMs() - start;
  CHECK(took < 1000, "the call took %lld ms (rc %zd)", static_cast<long long>(took), n);
  bool reset = n == -1 && err == ECONNRESET;
  switch (expect) {
    case kReset: CHECK(reset, "want ECONNRESET, rc %zd errno %d", n, err); break;
    case kResetOrEof: CHECK(reset || n == 0, "want ECONNRESET or EOF, rc %zd", n); break;
    case kDataOrEnd:
      CHECK(reset || (n >= 0 && static_cast<uint64_t>(n) <= kRing), "rc %zd errno %d", n, err);
      break;
    case kSendFails:
      CHECK(n == -1 && (err == ECONNRESET || err == EPIPE), "send rc %zd errno %d", n, err);
      break;
  }
  // Whatever happened, later calls return too (no crash, no hang).
  start = NowMs();
  vsocket_recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  vsocket_send(fd, buf, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  CHECK(NowMs() - start < 1000, "a later call hung");
}

// One attack: what the peer writes into connection A's segment, and what
// the victim's next call must give.
using Attack = std::function<int64_t(Segment&)>;

struct Outcome {
  int victim_status = -1;
  int peer_status = -1;
  bool ok() const {
    return WIFEXITED(victim_status) && WEXITSTATUS(victim_status) == 0 &&
           WIFEXITED(peer_status) && WEXITSTATUS(peer_status) == 0;
  }
  std::string Describe() const {
    auto one = [](const char* who, int st) {
      if (WIFSIGNALED(st)) return std::string(who) + " killed by signal " +
                                  std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
      return std::string(who) + " exited " + std::to_string(WEXITSTATUS(st));
    };
    return one("victim", victim_status) + ", " + one("peer", peer_status);
  }
};

// The victim connects `attacks.size()` connections A_i and one B; the peer
// applies attacks[i] to A_i, then the victim makes one call on each A_i and
// an echo round trip on B.
Outcome RunAttacks(const std::vector<Attack>& attacks) {
  const int n = static_cast<int>(attacks.size());
  auto peer = [&](Ctl& ctl) {
    g_role = "peer";
    Configure();
    int port = 0;
    int lfd = Listen(&port);
    ctl.Send(0, port);
    // Accepted in any order: each connection's first byte says which it is.
    std::vector<int> conns(n + 1, -1);
    for (int i = 0; i <= n; ++i) {
      int fd = vsocket_accept(lfd, nullptr, nullptr);
      CHECK(fd >= 0, "accept");
      const char* name = vsocket_transport_name(fd);
      CHECK(name && std::string(name) == "shm", "accepted on %s", name ? name : "null");
      unsigned char id = 0;
      CHECK(vsocket_recv(fd, &id, 1, MSG_WAITALL) == 1 && id <= n, "id");
      conns[id] = fd;
    }
    std::vector<Segment> segments;
    for (int i = 0; i < n; ++i) segments.push_back(MapSegmentOf(conns[i], port));
    for (int i = 0; i < n; ++i) ctl.Send(0, attacks[i](segments[i]));
    Echo(conns[n]);
    ctl.Recv(0);  // the victim is done: only now may our ends close
  };
  auto victim = [&](Ctl& ctl, pid_t) {
    g_role = "victim";
    Configure();
    int port = static_cast<int>(ctl.Recv(1));
    std::vector<int> conns;
    for (int i = 0; i <= n; ++i) {
      conns.push_back(Connect(port));
      unsigned char id = static_cast<unsigned char>(i);
      CHECK(vsocket_send(conns[i], &id, 1, 0) == 1, "id");
    }
    std::vector<int64_t> expect;
    for (int i = 0; i < n; ++i) expect.push_back(ctl.Recv(1));
    for (int i = 0; i < n; ++i) VictimCall(conns[i], expect[i]);
    ExpectEcho(conns[n]);
    ctl.Send(1, 1);
  };
  // The peer is the pair's server, the victim its client.
  vsocket_test::PairStatus st =
      vsocket_test::ForkPair(peer, victim, {.watchdog_s = 60});  // never hang the suite
  Outcome out;
  if (!st.error.empty()) return out;
  out.victim_status = st.client.status;
  out.peer_status = st.server.status;
  return out;
}

constexpr int kToVictim = 1;    // server->client: the victim consumes it
constexpr int kFromVictim = 0;  // client->server: the victim produces it

Attack Head(uint64_t (*value)(uint64_t tail), int64_t expect) {
  return [value, expect](Segment& s) {
    fifo::RingControl* c = s.control(kToVictim);
    c->head.store(value(c->tail.load()));
    return expect;
  };
}

TEST(HostilePeer, ImpossibleHeadResetsOnlyThatConnection) {
  Outcome r = RunAttacks({
      Head([](uint64_t t) { return t + kRing + 1; }, kReset),   // one past a ring
      Head([](uint64_t t) { return t + 2 * kRing; }, kReset),
      Head([](uint64_t t) { return t - 1; }, kReset),           // behind the tail
      Head([](uint64_t) { return ~uint64_t{0}; }, kReset),
      Head([](uint64_t t) { return t + (uint64_t{1} << 63); }, kReset),
  });
  EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(HostilePeer, ResetAndEndFlagsEndTheConnection) {
  auto flags = [](uint32_t value, int64_t expect) -> Attack {
    return [value, expect](Segment& s) {
      s.control(kToVictim)->flags.store(value);
      return expect;
    };
  };
  Outcome r = RunAttacks({flags(fifo::kReset, kReset), flags(~0u, kReset),
                   flags(fifo::kProducerClosed, kResetOrEof)});
  EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(HostilePeer, ImpossibleTailFailsTheVictimsSend) {
  auto tail = [](uint64_t (*value)(uint64_t head)) -> Attack {
    return [value](Segment& s) {
      fifo::RingControl* c = s.control(kFromVictim);
      c->tail.store(value(c->head.load()));
      return int64_t{kSendFails};
    };
  };
  // The victim reads the tail again only within half a ring of sends, so
  // the tail must still be impossible then: "consumed a ring more than
  // sent" stays so; "one byte more" would look honest by then, and costs
  // the attacker only its own data.
  Outcome r = RunAttacks({tail([](uint64_t h) { return h + kRing + 1; }),
                   tail([](uint64_t h) { return h - kRing - 1; }),
                   tail([](uint64_t) { return uint64_t{1} << 62; })});
  EXPECT_TRUE(r.ok()) << r.Describe();
}

// Seeded garbage in every word of the victim's receive control block:
// whatever it is, the call returns at once, with data only when the
// indices are possible.
TEST(HostilePeer, ArbitraryControlWordsNeverCrashOrHang) {
  std::vector<Attack> attacks;
  uint64_t seed = 0x14;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed ^ (seed >> 29);
  };
  for (int i = 0; i < 8; ++i) {
    uint64_t head = next(), wake = next(), flags = next();
    bool near = i % 2 == 0;  // half within a ring of the tail
    attacks.push_back([=](Segment& s) {
      fifo::RingControl* c = s.control(kToVictim);
      uint64_t tail = c->tail.load();
      uint64_t h = near ? tail + head % (kRing + 1) : head;
      c->head.store(h);
      c->reader_wake.store(static_cast<uint32_t>(wake));
      c->writer_wake.store(static_cast<uint32_t>(wake >> 32));
      c->recv_window.store(static_cast<uint32_t>(flags >> 32));
      c->flags.store(static_cast<uint32_t>(flags) & (i < 4 ? 0u : ~0u));
      bool possible = h - tail <= kRing;
      return int64_t{possible ? kDataOrEnd : kReset};
    });
  }
  Outcome r = RunAttacks(attacks);
  EXPECT_TRUE(r.ok()) << r.Describe();
}

// The peer truncates the shared file: every page of the victim's mapping is
// gone, and touching one raises SIGBUS; the segment fault guard resets that
// connection.
TEST(HostilePeer, TruncatedSegmentDoesNotKillTheVictim) {
  // A pool holds B too: TruncatedPoolResetsThatPoolOnly is the pool's case.
  if (PoolsOn()) GTEST_SKIP() << "pools: see TruncatedPoolResetsThatPoolOnly";
  Outcome r = RunAttacks({[](Segment& s) {
    CHECK(ftruncate(s.fd, 0) == 0, "ftruncate");
    return int64_t{kResetOrEof};
  }});
  EXPECT_TRUE(r.ok()) << r.Describe();
}

// Pools (VSOCKET_SHM_POOL=1): the peer truncates the victim's pool file.
// Both of the victim's connections in that pool reset, as kernel TCP
// connections that received a RST would (ECONNRESET, or EOF once the end
// was seen); a connection of another pair -- the peer's own pool, which the
// victim maps as that connection's server -- keeps working, on both sides.
TEST(HostilePeer, TruncatedPoolResetsThatPoolOnly) {
  const char* was = getenv("VSOCKET_SHM_POOL");
  std::string before = was ? was : "";
  setenv("VSOCKET_SHM_POOL", "1", 1);  // the forked pair inherits it
  auto peer = [&](Ctl& ctl) {
    g_role = "peer";
    Configure();
    int port = 0;
    int lfd = Listen(&port);
    ctl.Send(0, port);
    int victim_port = static_cast<int>(ctl.Recv(0));
    std::vector<int> conns(2, -1);
    for (int i = 0; i < 2; ++i) {
      int fd = vsocket_accept(lfd, nullptr, nullptr);
      CHECK(fd >= 0, "accept");
      unsigned char id = 0;
      CHECK(vsocket_recv(fd, &id, 1, MSG_WAITALL) == 1 && id < 2, "id");
      conns[id] = fd;
    }
    int other = Connect(victim_port);  // the other pair: the peer's pool
    Segment a = MapSegmentOf(conns[0], port);
    CHECK(a.pooled, "the victim's offer is not a pool's slice");
    CHECK(ftruncate(a.fd, 0) == 0, "ftruncate");
    ctl.Send(0, 1);
    ExpectEcho(other);
    ctl.Recv(0);  // the victim is done
  };
  auto victim = [&](Ctl& ctl, pid_t) {
    g_role = "victim";
    Configure();
    int port = static_cast<int>(ctl.Recv(1));
    int my_port = 0;
    int lfd = Listen(&my_port);
    ctl.Send(1, my_port);
    std::vector<int> conns;
    for (int i = 0; i < 2; ++i) {
      conns.push_back(Connect(port));
      unsigned char id = static_cast<unsigned char>(i);
      CHECK(vsocket_send(conns[i], &id, 1, 0) == 1, "id");
    }
    int other = vsocket_accept(lfd, nullptr, nullptr);
    CHECK(other >= 0, "accept");
    const char* name = vsocket_transport_name(other);
    CHECK(name && std::string(name) == "shm", "accepted on %s", name ? name : "null");
    ctl.Recv(1);  // truncated
    VictimCall(conns[0], kResetOrEof);
    VictimCall(conns[1], kResetOrEof);
    Echo(other);
    ctl.Send(1, 1);
  };
  vsocket_test::PairStatus st = vsocket_test::ForkPair(peer, victim, {.watchdog_s = 60});
  if (was) setenv("VSOCKET_SHM_POOL", before.c_str(), 1);
  else unsetenv("VSOCKET_SHM_POOL");
  ASSERT_TRUE(st.error.empty()) << st.error;
  Outcome r;
  r.victim_status = st.client.status;
  r.peer_status = st.server.status;
  EXPECT_TRUE(r.ok()) << r.Describe();
}

}  // namespace
