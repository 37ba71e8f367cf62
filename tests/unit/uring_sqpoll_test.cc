// The io_uring engine with SQPOLL (VSOCKET_TOE_SQPOLL, toe_backend/README.md)
// over real loopback TCP connections whose peer is a plain kernel socket:
// bytes go both ways intact through the SQ thread, two threads with a ring
// each share the process's one SQ thread, a forked child starts its own,
// the toe transport reports it in VSOCKET_STATS, a kernel that refuses it
// leaves plain rings with the reason named, an unparsable setting is
// logged and leaves SQPOLL off, and callers that spin for their
// completions (VSOCKET_TOE_SQPOLL_SPIN_US) get the same bytes.
//
// main() asks for SQPOLL (2 ms idle) before anything reads the settings;
// each test skips, naming the kernel's reason, where it cannot be had.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "toe_backend/toe_config.h"
#include "toe_backend/uring_engine.h"
#include "toe_backend/uring_ring.h"
#include "tests/unit/uring_test_pair.h"
#include "vsocket/vsocket.h"

namespace vsocket::toe {
namespace {

// Why SQPOLL is not on in this process, or "" when it is.
std::string NoSqpoll() {
  const UringSupport& s = ProbeUring();
  if (!s.available) return std::string("io_uring unavailable: ") + strerror(s.error);
  if (!s.sqpoll)
    return std::string("the kernel refused SQPOLL: ") + strerror(s.sqpoll_error);
  return "";
}

#define SKIP_WITHOUT_SQPOLL()                          \
  do {                                                 \
    std::string why = NoSqpoll();                      \
    if (!why.empty()) GTEST_SKIP() << why;             \
  } while (0)

// The process's SQ threads: its tasks named iou-sqp-<pid>.
int SqThreads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("iou-sqp-", 0) == 0) ++n;
  }
  closedir(d);
  return n;
}

// Sends `total` pattern bytes through the engine in `piece`-byte calls and
// reads them back at the plain peer, while the peer sends `total` bytes the
// engine reads in `piece`-byte calls.  Returns "" or what went wrong.
std::string ExchangeBothWays(UringEngine& e, const Pair& p, size_t total, size_t piece) {
  std::string peer_error;
  std::thread peer([&] {
    std::vector<uint8_t> out(total), in(total);
    for (size_t i = 0; i < total; ++i) out[i] = PatternByte(i + 7);
    std::thread writer([&] {
      for (size_t done = 0; done < total;) {
        ssize_t n = send(p.peer, out.data() + done, total - done, MSG_NOSIGNAL);
        if (n <= 0) return;
        done += static_cast<size_t>(n);
      }
    });
    if (recv(p.peer, in.data(), total, MSG_WAITALL) != static_cast<ssize_t>(total))
      peer_error = "the peer got a short stream";
    writer.join();
    for (size_t i = 0; i < total && peer_error.empty(); ++i)
      if (in[i] != PatternByte(i))
        peer_error = "the peer got a wrong byte at " + std::to_string(i);
  });
  ToeHandle h = e.Adopt(p.ours);
  std::string error;
  std::thread sender([&] {
    std::vector<uint8_t> buf(piece);
    for (size_t off = 0; off < total;) {
      size_t len = std::min(piece, total - off);
      for (size_t i = 0; i < len; ++i) buf[i] = PatternByte(off + i);
      ssize_t n = SendFrom(e, h, buf.data(), len, MSG_NOSIGNAL);
      if (n <= 0) {
        error = "Send: " + std::string(strerror(static_cast<int>(-n)));
        return;
      }
      off += static_cast<size_t>(n);
    }
  });
  std::vector<uint8_t> buf(piece);
  uint64_t got = 0;
  while (got < total && error.empty()) {
    ssize_t n = RecvInto(e, h, buf.data(), buf.size(), 0);
    if (n <= 0) {
      error = n == 0 ? "Recv: early end of stream"
                     : "Recv: " + std::string(strerror(static_cast<int>(-n)));
      break;
    }
    for (ssize_t i = 0; i < n && error.empty(); ++i)
      if (buf[i] != PatternByte(got + i + 7))
        error = "Recv: wrong byte at " + std::to_string(got + i);
    got += static_cast<uint64_t>(n);
  }
  sender.join();
  peer.join();
  e.Close(h);
  return !error.empty() ? error : peer_error;
}

TEST(UringSqpoll, BytesGoBothWaysIntactThroughTheSqThread) {
  SKIP_WITHOUT_SQPOLL();
  UringEngine engine(64 * 1024, 0);
  {
    Pair p;
    EXPECT_EQ(ExchangeBothWays(engine, p, 4 << 20, 4096), "");
  }
  {
    Pair p;  // small pieces: the read-ahead through the SQ thread too
    EXPECT_EQ(ExchangeBothWays(engine, p, 256 << 10, 100), "");
  }
  EXPECT_NE(ThisThreadSqpollRing(), nullptr);
  EXPECT_GT(engine.counters().sqpoll_calls.load(), 1000u);
  EXPECT_GT(engine.counters().readahead_enters.load(), 0u);
  EXPECT_EQ(GetSqpollCounters().plain_rings.load(), 0u);
}

std::atomic<int> g_sigpipes{0};  // lock-free: fine in a handler

TEST(UringSqpoll, BlockingAndSignalsStayTheKernels) {
  SKIP_WITHOUT_SQPOLL();
  Pair p;
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  char buf[16];
  EXPECT_EQ(RecvInto(engine, h, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
  std::thread late([&] {
    usleep(50000);
    send(p.peer, "late", 4, 0);
  });
  ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 4);  // waited for it
  late.join();
  EXPECT_EQ(std::string(buf, 4), "late");
  // A send to a closed peer: EPIPE, and SIGPIPE raised on the caller's
  // thread only without MSG_NOSIGNAL (the SQ thread's would be lost).
  close(p.peer);
  p.peer = -1;
  usleep(20000);
  ssize_t n = 0;
  for (int i = 0; i < 100 && n != -EPIPE; ++i) n = SendFrom(engine, h, "x", 1, MSG_NOSIGNAL);
  ASSERT_EQ(n, -EPIPE);
  struct sigaction count = {}, old = {};
  count.sa_handler = [](int) { ++g_sigpipes; };
  ASSERT_EQ(sigaction(SIGPIPE, &count, &old), 0);
  EXPECT_EQ(SendFrom(engine, h, "x", 1, MSG_NOSIGNAL), -EPIPE);
  EXPECT_EQ(g_sigpipes, 0);
  EXPECT_EQ(SendFrom(engine, h, "x", 1, 0), -EPIPE);
  EXPECT_EQ(g_sigpipes, 1);
  sigaction(SIGPIPE, &old, nullptr);
  engine.Close(h);
}

TEST(UringSqpoll, TwoThreadsWithRingsShareOneSqThread) {
  SKIP_WITHOUT_SQPOLL();
  UringEngine engine(64 * 1024, 0);
  Pair a;
  ASSERT_EQ(ExchangeBothWays(engine, a, 64 << 10, 1000), "");
  struct io_uring* mine = ThisThreadSqpollRing();
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(SqThreads(), 1);
  std::string error;
  int threads_meanwhile = -1;
  std::thread other([&] {
    Pair b;
    error = ExchangeBothWays(engine, b, 64 << 10, 1000);
    struct io_uring* theirs = ThisThreadSqpollRing();  // attached, not plain
    if (!theirs || theirs == mine) error += " (no SQPOLL ring of its own)";
    threads_meanwhile = SqThreads();
  });
  other.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(threads_meanwhile, 1);
  EXPECT_EQ(SqThreads(), 1);
  EXPECT_EQ(GetSqpollCounters().plain_rings.load(), 0u);
  // The other thread's ring is gone with it; ours still works.
  Pair c;
  EXPECT_EQ(ExchangeBothWays(engine, c, 64 << 10, 1000), "");
}

TEST(UringSqpoll, AForkedChildStartsItsOwnSqThread) {
  SKIP_WITHOUT_SQPOLL();
  UringEngine engine(64 * 1024, 0);
  {
    Pair p;
    ASSERT_EQ(ExchangeBothWays(engine, p, 64 << 10, 1000), "");
  }
  ASSERT_EQ(SqThreads(), 1);
  pid_t child = fork();
  if (child == 0) {
    // No thread is copied: the parent's SQ thread is not here.
    if (SqThreads() != 0) _exit(2);
    Pair p;
    if (!ExchangeBothWays(engine, p, 64 << 10, 1000).empty()) _exit(3);
    if (!ThisThreadSqpollRing() || SqThreads() != 1) _exit(4);
    // A second thread of the child attaches to the child's SQ thread.
    bool ok = false;
    std::thread other([&] {
      Pair q;
      ok = ExchangeBothWays(engine, q, 64 << 10, 1000).empty() && ThisThreadSqpollRing();
    });
    other.join();
    if (!ok) _exit(5);
    if (SqThreads() != 1 || GetSqpollCounters().plain_rings.load() != 0) _exit(6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // The parent's ring and SQ thread are untouched.
  Pair p;
  EXPECT_EQ(ExchangeBothWays(engine, p, 64 << 10, 1000), "");
  EXPECT_EQ(SqThreads(), 1);
}

TEST(UringSqpoll, TheToeTransportRunsOnItAndTheStatsSaySo) {
  SKIP_WITHOUT_SQPOLL();
  VsocketPair c;  // VSOCKET_TRANSPORT=toe, the peer a plain TCP program
  ASSERT_GE(c.fd, 0);
  ASSERT_STREQ(vsocket_transport_name(c.fd), "toe");
  char buf[64] = {};
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(vsocket_send(c.fd, "ping", 4, 0), 4);
    ASSERT_EQ(recv(c.peer, buf, 4, MSG_WAITALL), 4);
    ASSERT_EQ(send(c.peer, "pong!", 5, 0), 5);
    ASSERT_EQ(vsocket_recv(c.fd, buf, 5, MSG_WAITALL), 5);
    ASSERT_EQ(std::string(buf, 5), "pong!");
  }
  std::string json = StatsJson();
  EXPECT_NE(json.find("\"sqpoll\":true"), std::string::npos) << json;
  EXPECT_GE(StatsNumber(json, "sqpoll_calls"), 100u) << json;
  // After the SQ thread's idle time (2 ms) it sleeps: the next submission
  // wakes it with an io_uring_enter, and the stats count it.
  uint64_t wakeups = StatsNumber(json, "sqpoll_wakeups");
  usleep(50000);
  ASSERT_EQ(vsocket_send(c.fd, "ping", 4, 0), 4);
  ASSERT_EQ(recv(c.peer, buf, 4, MSG_WAITALL), 4);
  EXPECT_GT(StatsNumber(StatsJson(), "sqpoll_wakeups"), wakeups);
  EXPECT_EQ(GetToeConfig().sqpoll_idle_ms, 2u);
}

// ---- Images of this test binary started with another environment --------

// Runs this binary's tests matching `filter` in a child with `env` set (and
// TOE_SQPOLL_TEST_CHILD=1), after `before_exec` ran in the child; its exit
// status, and what it wrote to stderr in *err.
int RunImage(const char* filter, const std::vector<std::string>& env, std::string* err,
             void (*before_exec)() = nullptr) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    for (const std::string& e : env) putenv(strdup(e.c_str()));
    setenv("TOE_SQPOLL_TEST_CHILD", "1", 1);
    if (before_exec) before_exec();
    std::string f = std::string("--gtest_filter=") + filter;
    char self[] = "/proc/self/exe";
    char* argv[] = {self, f.data(), nullptr};
    execv(self, argv);
    _exit(111);
  }
  close(pipe_fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) err->append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool InChildImage() { return getenv("TOE_SQPOLL_TEST_CHILD") != nullptr; }

TEST(UringSqpoll, AnUnparsableSettingIsLoggedOnceAndLeavesItOff) {
  std::string err;
  EXPECT_EQ(RunImage("UringSqpollImage.SettingIsOff", {"VSOCKET_TOE_SQPOLL=2ms"}, &err), 0)
      << err;
  const std::string line = "vsocket: ignoring VSOCKET_TOE_SQPOLL=2ms";
  size_t at = err.find(line);
  EXPECT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find(line, at + 1), std::string::npos) << "logged twice: " << err;
}

// Runs only in the image AnUnparsableSettingIsLoggedOnceAndLeavesItOff starts.
TEST(UringSqpollImage, SettingIsOff) {
  if (!InChildImage()) GTEST_SKIP() << "runs in its parent's child";
  EXPECT_EQ(GetToeConfig().sqpoll_idle_ms, 0u);
  EXPECT_EQ(ThisThreadSqpollRing(), nullptr);
  if (!ProbeUring().available) return;
  EXPECT_FALSE(ProbeUring().sqpoll);
  EXPECT_EQ(ProbeUring().sqpoll_error, 0);
  EXPECT_EQ(ProbeUring().setup_flags & IORING_SETUP_SQPOLL, 0u);
  Pair p;
  UringEngine engine(64 * 1024, 0);
  EXPECT_EQ(ExchangeBothWays(engine, p, 64 << 10, 100), "");
  EXPECT_EQ(engine.counters().sqpoll_calls.load(), 0u);
  EXPECT_EQ(SqThreads(), 0);
}

TEST(UringSqpoll, CallsThatSpinForTheirCompletionsGetTheSameBytes) {
  SKIP_WITHOUT_SQPOLL();
  std::string err;
  EXPECT_EQ(RunImage("UringSqpollImage.Spinning", {"VSOCKET_TOE_SQPOLL_SPIN_US=20"}, &err), 0)
      << err;
}

// Runs only in the image CallsThatSpinForTheirCompletionsGetTheSameBytes
// starts.
TEST(UringSqpollImage, Spinning) {
  if (!InChildImage()) GTEST_SKIP() << "runs in its parent's child";
  SKIP_WITHOUT_SQPOLL();
  EXPECT_EQ(ProbeUring().sqpoll_spin_ns, 20000u);
  UringEngine engine(64 * 1024, 0);
  Pair p;
  EXPECT_EQ(ExchangeBothWays(engine, p, 256 << 10, 1000), "");
  EXPECT_GE(engine.counters().sqpoll_calls.load(), (256u << 10) / 1000);  // the sends
}

// Without privilege and with RLIMIT_NPROC at 0 the kernel cannot start the
// SQ thread (EAGAIN): the refusal a container's process limit gives.
void WithoutThreadsToSpare() {
  // LeakSanitizer's exit check needs a tracer thread, which this limit
  // forbids too (under ASan the image would abort at exit): off here.
  std::string asan = getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "";
  setenv("ASAN_OPTIONS", (asan + (asan.empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
  // A uid no other process runs as: RLIMIT_NPROC counts the processes of
  // the user, and with another process of it alive (nobody's, from a test
  // running beside this one) the kernel refused the exec itself (EAGAIN;
  // the child's exit 111: 1 failure in the ASan hunt's 5 parallel passes).
  uid_t lone_uid = 2000000000u + static_cast<uid_t>(getpid() % 100000);
  struct rlimit none = {0, 0};
  if (setrlimit(RLIMIT_NPROC, &none) != 0 || setgid(65534) != 0 || setuid(lone_uid) != 0)
    _exit(77);
}

TEST(UringSqpoll, ARefusedSqThreadLeavesPlainRingsWithTheReasonNamed) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to drop to an unprivileged user";
  std::string err;
  int rc = RunImage("UringSqpollImage.Refused", {}, &err, &WithoutThreadsToSpare);
  if (rc == 77) GTEST_SKIP() << "could not drop privileges";
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("toe: VSOCKET_TOE_SQPOLL: the kernel refused an SQPOLL ring"),
            std::string::npos)
      << err;
}

// Runs only in the image ARefusedSqThreadLeavesPlainRingsWithTheReasonNamed
// starts.
TEST(UringSqpollImage, Refused) {
  if (!InChildImage()) GTEST_SKIP() << "runs in its parent's child";
  const UringSupport& s = ProbeUring();
  if (!s.available) GTEST_SKIP() << "io_uring unavailable: " << strerror(s.error);
  EXPECT_FALSE(s.sqpoll);
  EXPECT_EQ(s.sqpoll_error, EAGAIN) << strerror(s.sqpoll_error);
  EXPECT_EQ(ThisThreadSqpollRing(), nullptr);
  VsocketPair c;
  ASSERT_GE(c.fd, 0);
  EXPECT_STREQ(vsocket_transport_name(c.fd), "toe");
  ASSERT_EQ(vsocket_send(c.fd, "hello", 5, 0), 5);
  char buf[8] = {};
  ASSERT_EQ(recv(c.peer, buf, 5, MSG_WAITALL), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  std::string json = StatsJson();
  EXPECT_NE(json.find("\"sqpoll\":false,\"sqpoll_refused\":\"EAGAIN\""), std::string::npos)
      << json;
  EXPECT_EQ(SqThreads(), 0);
}

}  // namespace
}  // namespace vsocket::toe

int main(int argc, char** argv) {
  // Before anything reads the settings; an image a test started keeps what
  // it was given.
  setenv("VSOCKET_TOE_SQPOLL", "2", 0);
  setenv("VSOCKET_TRANSPORT", "toe", 0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
