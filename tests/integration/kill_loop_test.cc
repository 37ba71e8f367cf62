// kill_loop: one end of a connection is SIGKILLed at a random moment of its
// life -- library start, listen, offer, connect, claim, transfer, shutdown,
// close -- again and again.  The other end is this test process, a
// long-lived survivor using the vsocket_* API, so that leaks add up where
// they can be counted.  Each iteration checks:
//  - the survivor sees EOF or ECONNRESET (sends: EPIPE/ECONNRESET) within
//    1 s of the victim's death and never hangs;
//  - what it received is a prefix of the victim's deterministic stream
//    (ByteStream), byte for byte; a victim that lived to the end received
//    the survivor's whole stream (its SHA-256);
// and, after the loop:
//  - the survivor's descriptor count and its /dev/shm/vsocket- mappings are
//    back to their level before the loop;
//  - no segment file of the loop's processes is left in
//    /dev/shm/vsocket-<uid>/ once a new process has made a connection
//    (names of dead processes are swept at the next offer; the survivor's
//    own pools stay while it lives);
//  - a new pair of processes connects over shared memory and moves data.
//
// The victim is vsocket_testpeer in "source" mode (send BYTES, shutdown,
// read the reply to EOF), as client (the survivor listens) or as server (the
// survivor connects).  The kill lands uniformly in [0, 1.25 x the victim's
// measured life], so every step is hit in proportion to its length; the
// kill points of short steps (offer, claim) come from many iterations.
//
// VSOCKET_KILL_LOOP_ITERATIONS (default 100: CI) and VSOCKET_KILL_LOOP_SEED
// (default: the time; printed) make the by-hand run:
//   VSOCKET_KILL_LOOP_ITERATIONS=500 build-release/tests/integration/it_kill_loop_test
// The tcp case (VSOCKET_TRANSPORT=tcp in the victim) is the harness's
// reference with a fifth of the iterations.
//
// Built a second time as tests/rdma's rdma_kill_loop_test
// (VSOCKET_KILL_LOOP_RDMA): both ends VSOCKET_TRANSPORT=rdma on the guest's
// rxe address ($VSOCKET_RDMA_SELF_IP), so the kills land in the RDMA CM
// handshake, the transfer and the close; it also checks that the survivor's
// registered memory (VSOCKET_STATS rdma_registered) is back to its level.
// Run by tests/rdma/run-suite.sh in the guest.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "byte_stream.h"
#include "clock.h"
#include "fifo_bridge/shm_segment.h"
#include "peer_harness.h"
#include "segment_owner.h"
#include "sha256.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"

namespace vsocket_test {
namespace {

constexpr int64_t kMaxDetectNs = 1'000'000'000;

// Where and on what the loop runs.
#ifdef VSOCKET_KILL_LOOP_RDMA
std::string Host() { return RdmaGuestIp(); }
constexpr const char* kFastPath = "rdma";
Env FastEnv() { return {{"VSOCKET_TRANSPORT", "rdma"}}; }
#else
std::string Host() { return "127.0.0.1"; }
constexpr const char* kFastPath = "shm";
Env FastEnv() { return Auto(); }
#endif

sockaddr_in Address(int port) { return Ipv4(Host().c_str(), port); }

// Bytes of registered RDMA memory in this process (0 without RDMA).
int64_t RegisteredBytes() {
  std::string json(1 << 16, '\0');
  json.resize(std::min(json.size() - 1, vsocket_stats_json(json.data(), json.size())));
  static const std::string kKey = "\"rdma_registered\":{\"bytes\":";
  size_t at = json.find(kKey);
  if (at == std::string::npos) return 0;
  return atoll(json.c_str() + at + kKey.size());
}
constexpr int64_t kIterationLimitNs = 15'000'000'000;
constexpr size_t kMaxVictimBytes = 2 << 20;
constexpr size_t kMaxReplyBytes = 1 << 20;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, nullptr, 0) : fallback;
}

int CountFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the DIR's own descriptor
}

int CountShmMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find("/dev/shm/vsocket-") != std::string::npos;
  }
  return n;
}

// Segment files in the user's directory whose creator is one of `pids`.
std::vector<std::string> SegmentsOf(const std::set<pid_t>& pids) {
  std::vector<std::string> found;
  const std::string dir = ShmDir(geteuid());
  // This process's own pools (fifo_bridge/shm_pool.h: it connects as a
  // client when the victim is a server) stay while it lives: a pool is
  // mapped once per process, not per connection.
  const std::string own_pool = "pool-" + std::to_string(getpid()) + "-";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (std::string_view(e->d_name).starts_with(own_pool)) continue;
    const std::string path = dir + "/" + e->d_name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    vsocket::fifo::SegmentHeader h{};
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n == static_cast<ssize_t>(sizeof(h)) && pids.count(static_cast<pid_t>(h.client_pid)) &&
        MadeInThisPidNamespace(h)) {
      found.push_back(path);
    }
  }
  closedir(d);
  return found;
}

bool Exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// The survivor's side of one connection: reads and checks the victim's
// stream, sends its own, until EOF/reset in both directions.
struct Exchange {
  uint64_t victim_seed, reply_seed, reply_bytes;
  uint64_t received = 0, sent = 0;
  std::string end;          // "eof", "ECONNRESET", or what went wrong
  std::string failure;      // non-empty: the iteration failed
  int64_t end_ns = 0;
  bool unclaimed_at_death = false;  // took the open finding's allowance
};

// OPEN FINDING (docs/ROBUSTNESS.md): a victim *server* killed after our
// connect but before its accept() (no "conn" line) sometimes leaves our
// unclaimed offer undetected until the claim timeout moves it to TCP (about
// 1 run in 3,700).  Until that is fixed, such a death may take
// VSOCKET_CLAIM_TIMEOUT_MS (3 s) + 1 s, counted apart; with
// VSOCKET_KILL_LOOP_STRICT=1 it gets 1 s like every other death.
constexpr int64_t kUnclaimedDetectNs = 4'000'000'000;

bool Strict() {
  const char* v = getenv("VSOCKET_KILL_LOOP_STRICT");
  return v && *v == '1';
}

// `victim_accepted`: whether a victim server reached accept() (its "conn"
// line); always true for a victim client.
void RunExchange(int fd, pid_t victim, const std::atomic<int64_t>& kill_ns,
                 const std::function<bool()>& victim_accepted, Exchange* x) {
  ByteStream expected(x->victim_seed), reply(x->reply_seed);
  Rng sizes(x->victim_seed ^ 0x5eed);
  std::vector<char> in(256 << 10), want(256 << 10), out(64 << 10);
  size_t out_len = 0, out_off = 0;
  bool reading = true, writing = x->reply_bytes > 0, shut = false;
  int64_t dead_ns = 0;
  const int64_t start = NowNs();
  while (reading || writing) {
    const int64_t now = NowNs();
    if (dead_ns == 0) {
      if (kill_ns.load() != 0) dead_ns = kill_ns.load();
      else if (Exited(victim)) dead_ns = now;
    }
    if (dead_ns != 0 && now - dead_ns > kMaxDetectNs) {
      const bool unclaimed = !Strict() && !victim_accepted();
      if (!x->unclaimed_at_death && !victim_accepted()) {
        // For the open finding: did the kernel tell our TCP socket?
        tcp_info info{};
        socklen_t len = sizeof(info);
        int so_error = 0;
        socklen_t elen = sizeof(so_error);
        int ri = vsocket_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len);
        int re = vsocket_getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &elen);
        std::printf("unclaimed offer 1 s after the server's death: path %s, tcp state %d "
                    "(rc %d), SO_ERROR %d (rc %d), received %llu sent %llu\n",
                    vsocket_transport_name(fd), ri == 0 ? info.tcpi_state : -1, ri,
                    so_error, re, static_cast<unsigned long long>(x->received),
                    static_cast<unsigned long long>(x->sent));
      }
      x->unclaimed_at_death = unclaimed;
      if (!unclaimed || now - dead_ns > kUnclaimedDetectNs) {
        x->failure = std::string("hang: no EOF/reset ") + (reading ? "on recv" : "on send") +
                     (unclaimed ? " 4 s" : " 1 s") + " after the victim died";
        return;
      }
    }
    if (now - start > kIterationLimitNs) {
      x->failure = "iteration took longer than 15 s";
      return;
    }
    pollfd p{fd, static_cast<short>((reading ? POLLIN : 0) | (writing ? POLLOUT : 0)), 0};
    vsocket_poll(&p, 1, 10);
    if (reading) {
      ssize_t n = vsocket_recv(fd, in.data(), sizes.IoSize(in.size()), MSG_DONTWAIT);
      if (n > 0) {
        expected.Fill(want.data(), n);
        if (memcmp(in.data(), want.data(), n) != 0) {
          x->failure = "corrupt bytes after offset " + std::to_string(x->received);
          return;
        }
        x->received += n;
      } else if (n == 0 || errno == ECONNRESET) {
        x->end = n == 0 ? "eof" : "ECONNRESET";
        x->end_ns = NowNs();
        reading = false;
      } else if (errno != EAGAIN && errno != EINTR) {
        x->failure = std::string("recv failed with ") + strerrorname_np(errno);
        return;
      }
    }
    if (writing) {
      if (out_off == out_len) {
        out_len = std::min<uint64_t>(out.size(), x->reply_bytes - x->sent);
        reply.Fill(out.data(), out_len);
        out_off = 0;
      }
      ssize_t n = vsocket_send(fd, out.data() + out_off, out_len - out_off,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        out_off += n;
        x->sent += n;
        if (x->sent == x->reply_bytes) writing = false;
      } else if (errno == EPIPE || errno == ECONNRESET) {
        writing = false;
      } else if (errno != EAGAIN && errno != EINTR) {
        x->failure = std::string("send failed with ") + strerrorname_np(errno);
        return;
      }
    }
    if (!writing && !shut) {
      vsocket_shutdown(fd, SHUT_WR);  // may fail with ENOTCONN once reset
      shut = true;
    }
  }
}

enum class VictimRole { kClient, kServer };

struct Tally {
  int killed = 0, finished = 0, never_connected = 0, eof = 0, reset = 0;
  int shm = 0, tcp = 0;  // shm: the fast path (rdma in the RDMA build)
  int64_t max_detect_ns = 0;
  int unclaimed_slow = 0;  // deaths detected past 1 s under the open finding
  int64_t max_unclaimed_detect_ns = 0;
};

class KillLoop {
 public:
  KillLoop(const Env& victim_env, uint64_t seed) : env_(victim_env), rng_(seed) {}

  // Listening socket of the survivor (victims that are clients).
  void Listen() {
    listener_ = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(listener_, 0);
    int one = 1;
    vsocket_setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a = Address(0);
    ASSERT_EQ(vsocket_bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(vsocket_listen(listener_, 16), 0);
    socklen_t len = sizeof(a);
    ASSERT_EQ(vsocket_getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    ASSERT_EQ(vsocket_fcntl(listener_, F_SETFL, O_NONBLOCK), 0);
  }
  void Unlisten() { vsocket_close(listener_); }

  struct Timing {
    int64_t life_ns = 0;     // spawn (a server: its port line) to reaped
    int64_t connect_ns = 0;  // spawn to its "conn" line (connection up)
  };
  // One victim; `kill_after_ns` < 0: let it live.
  Timing Iteration(VictimRole role, int64_t kill_after_ns, Tally* tally) {
    const uint64_t seed = rng_.Next();
    const uint64_t victim_bytes = 1 + rng_.Below(kMaxVictimBytes);
    Exchange x{.victim_seed = seed, .reply_seed = seed ^ 0xfeed,
               .reply_bytes = rng_.Below(kMaxReplyBytes)};
    PeerSpec spec{.args = {"source", std::to_string(victim_bytes), std::to_string(seed),
                           "--host", Host()},
                  .env = env_};
    Started victim = role == VictimRole::kClient ? StartClient(spec, port_) : StartServer(spec);
    EXPECT_TRUE(victim.child) << victim.error;
    if (!victim.child) return {};
    const pid_t pid = victim.child->pid();
    pids_.insert(pid);
    const int64_t born = NowNs();
    std::atomic<int64_t> kill_ns{0};
    std::thread killer;
    if (kill_after_ns >= 0) {
      killer = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::nanoseconds(kill_after_ns));
        if (!Exited(pid)) {
          ::kill(pid, SIGKILL);
          kill_ns.store(NowNs());
        }
      });
    }
    int fd = role == VictimRole::kClient ? AcceptFrom(pid, kill_ns) : ConnectTo(victim.port);
    std::string path = "none";
    if (fd >= 0) {
      path = vsocket_transport_name(fd);
      vsocket_fcntl(fd, F_SETFL, O_NONBLOCK);
      Child* child = victim.child.get();
      RunExchange(fd, pid, kill_ns,
                  [child, role] {
                    return role == VictimRole::kClient ||
                           child->Stdout().find("\nconn ") != std::string::npos;
                  },
                  &x);
    }
    const std::string reason = fd >= 0 ? vsocket_fallback_reason(fd) : "";
    if (fd >= 0) {
      EXPECT_EQ(vsocket_close(fd), 0) << strerrorname_np(errno) << " path " << path
                                      << " reason " << reason << " " << x.failure;
    }
    if (killer.joinable()) killer.join();
    PeerResult r = Finish(*victim.child, 5s);
    const int64_t life = NowNs() - born;
    // A kill that found the victim already exiting did not kill it.
    const bool killed = !r.status.exited && r.status.signal == SIGKILL;
    SCOPED_TRACE("victim " + std::string(role == VictimRole::kClient ? "client" : "server") +
                 " pid " + std::to_string(pid) + " seed " + std::to_string(seed) + " bytes " +
                 std::to_string(victim_bytes) + " kill after " +
                 std::to_string(kill_after_ns / 1000) + " us; path " + path + " " + reason + "; survivor got " +
                 std::to_string(x.received) + " sent " + std::to_string(x.sent) + " end " +
                 x.end + "\n" + r.Describe());
    EXPECT_EQ(x.failure, "");
    if (killed) {
      ++tally->killed;
      if (x.unclaimed_at_death) {
        ++tally->unclaimed_slow;
        if (!x.end.empty()) {
          tally->max_unclaimed_detect_ns =
              std::max(tally->max_unclaimed_detect_ns, x.end_ns - kill_ns.load());
        }
      } else if (!x.end.empty()) {
        tally->max_detect_ns = std::max(tally->max_detect_ns, x.end_ns - kill_ns.load());
      }
    } else {
      EXPECT_TRUE(r.ok());
      EXPECT_NE(fd, -1) << "a victim that lived never connected";
      EXPECT_EQ(x.end, "eof");
      EXPECT_EQ(x.received, victim_bytes);
      const Record got = r.One("received");
      EXPECT_EQ(got.Int("bytes"), static_cast<int64_t>(x.reply_bytes));
      EXPECT_EQ(got.Get("sha256"), StreamSha256Hex(x.reply_seed, x.reply_bytes));
      ++tally->finished;
    }
    if (fd < 0) ++tally->never_connected;
    tally->eof += x.end == "eof";
    tally->reset += x.end == "ECONNRESET";
    tally->shm += path == kFastPath;
    tally->tcp += path == "tcp";
    const int64_t conn_ns = r.One("conn").Int("t_ns");
    return {life, conn_ns > born ? conn_ns - born : 0};
  }

  const std::set<pid_t>& pids() const { return pids_; }

 private:
  // The connection of victim `pid`, or -1 once it died without one (after
  // the 1 s a late connection would need).
  int AcceptFrom(pid_t pid, const std::atomic<int64_t>& kill_ns) {
    int64_t dead_ns = 0;
    for (;;) {
      pollfd p{listener_, POLLIN, 0};
      vsocket_poll(&p, 1, 10);
      int fd = vsocket_accept(listener_, nullptr, nullptr);
      if (fd >= 0) return fd;
      EXPECT_TRUE(errno == EAGAIN || errno == ECONNABORTED) << strerrorname_np(errno);
      const int64_t now = NowNs();
      if (dead_ns == 0 && (kill_ns.load() != 0 || Exited(pid))) dead_ns = now;
      if (dead_ns != 0 && now - dead_ns > kMaxDetectNs) return -1;
    }
  }

  // Blocking connect (loopback: the kernel answers at once); -1 when the
  // victim's listener is gone.
  int ConnectTo(int port) {
    int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in a = Address(port);
    int r;
    do {
      r = vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } while (r != 0 && errno == EINTR);
    if (r == 0) return fd;
    EXPECT_TRUE(errno == ECONNREFUSED || errno == ECONNRESET) << strerrorname_np(errno);
    vsocket_close(fd);
    return -1;
  }

  Env env_;
  Rng rng_;
  int listener_ = -1;
  int port_ = 0;
  std::set<pid_t> pids_;
};

struct LoopCase {
  const char* name;
  bool shm;
  uint64_t divisor;  // iterations = VSOCKET_KILL_LOOP_ITERATIONS / divisor
};

class KillLoopTest : public testing::TestWithParam<LoopCase> {};

TEST_P(KillLoopTest, SurvivorSeesEofOrResetAndNothingLeaks) {
  const LoopCase& c = GetParam();
  const uint64_t iterations =
      std::max<uint64_t>(2, EnvU64("VSOCKET_KILL_LOOP_ITERATIONS", 100) / c.divisor);
  const uint64_t seed = EnvU64("VSOCKET_KILL_LOOP_SEED", static_cast<uint64_t>(time(nullptr)));
  std::printf("kill loop %s: %llu iterations, VSOCKET_KILL_LOOP_SEED=%llu\n", c.name,
              static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(seed));
  if (Host().empty()) GTEST_SKIP() << "VSOCKET_RDMA_SELF_IP is not set (not in the RDMA guest)";
#ifdef VSOCKET_KILL_LOOP_RDMA
  setenv("VSOCKET_TRANSPORT", "rdma", 1);  // the survivor, before its first call
#endif
  Rng rng(seed ^ 0xc0ffee);
  KillLoop loop(c.shm ? FastEnv() : ForceTcp(), seed);
  ASSERT_NO_FATAL_FAILURE(loop.Listen());

  // Warm-up, unkilled: starts the survivor's watcher thread and measures a
  // victim's life in each role.
  Tally tally;
  KillLoop::Timing timing[2];
  for (int i = 0; i < 2; ++i) {
    for (VictimRole role : {VictimRole::kClient, VictimRole::kServer}) {
      KillLoop::Timing t = loop.Iteration(role, -1, &tally);
      KillLoop::Timing& m = timing[role == VictimRole::kServer];
      m.life_ns = std::max(m.life_ns, t.life_ns);
      m.connect_ns = std::max(m.connect_ns, t.connect_ns);
    }
  }
  ASSERT_FALSE(HasFailure());
  const int fds_before = CountFds();
  const int maps_before = CountShmMappings();
  const int64_t registered_before = RegisteredBytes();

  const int64_t start = NowNs();
  for (uint64_t i = 0; i < iterations && !HasFailure(); ++i) {
    const VictimRole role = rng.Below(2) ? VictimRole::kServer : VictimRole::kClient;
    // Half the kills anywhere in the victim's life, half around its
    // connect (offer, SYN, claim: short steps a uniform draw rarely hits).
    const KillLoop::Timing& t = timing[role == VictimRole::kServer];
    int64_t kill_after = 0;
    if (rng.Below(2) || t.connect_ns == 0) {
      kill_after = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(t.life_ns * 5 / 4 + 1)));
    } else {
      kill_after = t.connect_ns / 2 + static_cast<int64_t>(rng.Below(
                                          static_cast<uint64_t>(t.connect_ns * 3 / 4 + 1)));
    }
    loop.Iteration(role, kill_after, &tally);
  }
  const int64_t elapsed_ms = (NowNs() - start) / 1'000'000;
  loop.Unlisten();
  std::printf("kill loop %s: %lld ms; killed %d, lived %d, never connected %d; "
              "survivor saw eof %d, reset %d; %s %d, tcp %d; slowest detection %lld ms\n",
              c.name, static_cast<long long>(elapsed_ms), tally.killed, tally.finished,
              tally.never_connected, tally.eof, tally.reset, kFastPath, tally.shm, tally.tcp,
              static_cast<long long>(tally.max_detect_ns / 1'000'000));
  if (tally.unclaimed_slow > 0) {
    std::printf("kill loop %s: OPEN FINDING: %d server(s) killed before accept() detected "
                "after more than 1 s (slowest %lld ms)\n",
                c.name, tally.unclaimed_slow,
                static_cast<long long>(tally.max_unclaimed_detect_ns / 1'000'000));
  }
  RecordProperty("unclaimed_slow", tally.unclaimed_slow);
  RecordProperty("killed", tally.killed);
  RecordProperty("max_detect_ms", static_cast<int>(tally.max_detect_ns / 1'000'000));
  ASSERT_FALSE(HasFailure());

  // Descriptors and mappings: back to their level (the watcher may still be
  // dropping a dead connection for a moment).
  int fds_after = 0, maps_after = 0;
  int64_t registered_after = 0;
  for (int tries = 0; tries < 200; ++tries) {
    fds_after = CountFds();
    maps_after = CountShmMappings();
    registered_after = RegisteredBytes();
    if (fds_after <= fds_before && maps_after <= maps_before &&
        registered_after <= registered_before) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LE(fds_after, fds_before) << "descriptors leaked by the survivor";
  EXPECT_LE(maps_after, maps_before) << "segment mappings leaked by the survivor";
  EXPECT_LE(registered_after, registered_before) << "registered RDMA memory leaked";

  // A new pair of processes connects (and its offer sweeps dead names).
  const Env env = c.shm ? FastEnv() : ForceTcp();
  PairResult pair = RunPair({.args = {"sink", "--host", Host()}, .env = env},
                            {.args = {"source", "1048576", "7", "--host", Host()}, .env = env},
                            20s);
  ASSERT_EQ(pair.error, "");
  EXPECT_TRUE(TookPath(pair.client, c.shm ? kFastPath : "tcp", c.shm ? "" : "disabled_by_config"))
      << pair.client.Describe();
  EXPECT_TRUE(DataIntact(pair.client, pair.server, 1048576, StreamSha256Hex(7, 1048576)));

  std::set<pid_t> ours = loop.pids();
  ours.insert(getpid());
  const std::vector<std::string> left = SegmentsOf(ours);
  EXPECT_TRUE(left.empty()) << left.size() << " segment files of the loop left, e.g. "
                            << (left.empty() ? "" : left.front());
}

// The one step the loop hits least: the client has created its offer and is
// inside the kernel's connect (here: held there by a full accept queue) when
// it dies.  Nobody will claim or revoke that offer; the next process that
// offers a connection must sweep it.
#ifndef VSOCKET_KILL_LOOP_RDMA
TEST(KillLoop, ClientKilledInsideConnectLeavesNoSegmentBehind) {
  int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(vsocket_listen(lfd, 0), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  // Fill the accept queue with plain connections nobody accepts.
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(50ms);
  Started victim = StartClient({.args = {"source", "1000", "1"}, .env = Auto()}, ntohs(a.sin_port));
  ASSERT_TRUE(victim.child) << victim.error;
  const pid_t pid = victim.child->pid();
  // Wait for its offer to appear, then kill it inside connect.
  std::vector<std::string> offers;
  for (int i = 0; i < 200 && offers.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    offers = SegmentsOf({pid});
  }
  EXPECT_EQ(offers.size(), 1u) << "the victim made no offer before its SYN was answered";
  victim.child->Signal(SIGKILL);
  PeerResult r = Finish(*victim.child, 5s);
  EXPECT_EQ(r.status.signal, SIGKILL) << r.Describe();
  for (int fd : fillers) close(fd);
  vsocket_close(lfd);

  // A new connection between new processes works and sweeps the dead offer.
  PairResult pair = RunPair({.args = {"sink"}, .env = Auto()},
                            {.args = {"source", "65536", "3"}, .env = Auto()}, 20s);
  ASSERT_EQ(pair.error, "");
  EXPECT_TRUE(TookPath(pair.client, "shm", "")) << pair.client.Describe();
  EXPECT_TRUE(DataIntact(pair.client, pair.server, 65536, StreamSha256Hex(3, 65536)));
  const std::vector<std::string> left = SegmentsOf({pid});
  EXPECT_TRUE(left.empty()) << "the dead client's offer is still there: " << left.front();
}

#endif  // !VSOCKET_KILL_LOOP_RDMA

INSTANTIATE_TEST_SUITE_P(Transports, KillLoopTest,
                         testing::Values(LoopCase{kFastPath, true, 1}, LoopCase{"tcp", false, 5}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace vsocket_test
