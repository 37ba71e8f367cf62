// peer_killed: one end is SIGKILLed in the middle of a transfer. The
// survivor's recv returns 0 or -1/ECONNRESET within 1 s of the kill; as on
// kernel TCP, at most one send then succeeds and
// later sends fail with EPIPE (MSG_NOSIGNAL: no signal; without it: SIGPIPE
// is raised, seen by a handler); once it has closed, no ring file of that
// connection is left in /dev/shm/vsocket-<uid>/ and its /proc/self/maps has
// no /dev/shm/vsocket- mapping but, with pools, a surviving client's own
// pool (no offer name points into it; its file goes at its exit). Both directions (kill the client, kill the
// server); the victim either streams (killed while data is in flight) or has
// stalled (survivor blocked in recv). Kernel TCP runs the same script as a
// reference for the harness.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"
#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr uint64_t kReadyBytes = 4 << 20;   // survivor says "ready" after this
constexpr uint64_t kStallBytes = 8 << 20;   // stalled victim stops writing here
constexpr uint64_t kEndless = uint64_t{1} << 40;
constexpr int64_t kMaxDetectNs = 1'000'000'000;

enum class Victim { kClient, kServer };
enum class Flow { kStreaming, kStalled };

struct KillCase {
  Victim victim;
  Flow flow;
  bool shm;  // false: VSOCKET_TRANSPORT=tcp on both ends (reference)
};

std::string CaseName(const testing::TestParamInfo<KillCase>& info) {
  const KillCase& c = info.param;
  return std::string(c.victim == Victim::kClient ? "KillClient" : "KillServer") +
         (c.flow == Flow::kStreaming ? "Streaming" : "Stalled") + (c.shm ? "Shm" : "Tcp");
}

std::vector<std::string> Split(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// The offer names (symlinks) of this user's directory whose text names
// pool `pool`'s slices ("<pool>#<slice>#<generation>").
std::vector<std::string> OffersNaming(const std::string& pool) {
  std::vector<std::string> out;
  const std::string dir = ShmDir(getuid());
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    char text[256];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), text, sizeof(text) - 1);
    if (n <= 0) continue;
    if (std::string(text, n).starts_with(pool + "#")) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

class PeerKilledTest : public testing::TestWithParam<KillCase> {};

TEST_P(PeerKilledTest, SurvivorSeesEofOrResetPromptlyThenEpipeAndCleansUp) {
  const KillCase& c = GetParam();
  const Env env = c.shm ? Auto() : ForceTcp();
  PeerSpec victim{.args = {"source", std::to_string(kEndless), "99"}, .env = env};
  if (c.flow == Flow::kStalled) {
    victim.args.insert(victim.args.end(), {"--stall-after", std::to_string(kStallBytes)});
  }
  const PeerSpec survivor{.args = {"survivor", std::to_string(kReadyBytes)}, .env = env};

  const bool kill_client = c.victim == Victim::kClient;
  Started server = StartServer(kill_client ? survivor : victim);
  ASSERT_TRUE(server.child) << server.error;
  Started client = StartClient(kill_client ? victim : survivor, server.port);
  ASSERT_TRUE(client.child) << client.error;
  Child& victim_proc = kill_client ? *client.child : *server.child;
  Child& survivor_proc = kill_client ? *server.child : *client.child;

  ASSERT_TRUE(survivor_proc.WaitForLine("ready", 20s))
      << Finish(survivor_proc, 0ms).Describe();
  if (c.flow == Flow::kStalled) {
    ASSERT_TRUE(victim_proc.WaitForLine("stalled", 20s)) << Finish(victim_proc, 0ms).Describe();
    std::this_thread::sleep_for(200ms);  // survivor drains and blocks in recv
  }
  const int64_t t_kill = NowNs();
  victim_proc.Signal(SIGKILL);

  PeerResult v = Finish(victim_proc, 5s);
  PeerResult s = Finish(survivor_proc, 15s);
  EXPECT_EQ(v.status.signal, SIGKILL) << v.Describe();
  ASSERT_TRUE(s.ok()) << s.Describe();
  SCOPED_TRACE("survivor:\n" + s.Describe());

  // recv returns 0 or -1/ECONNRESET, within 1 s of the kill.
  const Record eof = s.One("eof");
  const bool eof_or_reset = eof.Get("ret") == "0" ||
                            (eof.Get("ret") == "-1" && eof.Get("errno") == "ECONNRESET");
  EXPECT_TRUE(eof_or_reset) << "recv returned " << eof.Get("ret") << " errno "
                            << eof.Get("errno");
  const int64_t detect_ns = eof.Int("t_ns") - t_kill;
  EXPECT_GE(detect_ns, 0);
  EXPECT_LT(detect_ns, kMaxDetectNs) << "peer death noticed after " << detect_ns / 1'000'000
                                     << " ms";
  RecordProperty("detect_ms", std::to_string(detect_ns / 1'000'000));
  if (c.flow == Flow::kStalled) {
    EXPECT_EQ(eof.Int("received"), static_cast<int64_t>(kStallBytes));
  } else {
    EXPECT_GE(eof.Int("received"), static_cast<int64_t>(kReadyBytes));
  }

  // Sends after the death, with MSG_NOSIGNAL.
  const std::vector<std::string> sends = Split(s.One("nosignal_sends").Get("results"));
  ASSERT_FALSE(sends.empty());
  {
    // As kernel TCP: after a FIN, sends may succeed until the dead end's
    // RST comes back; one ECONNRESET may precede EPIPE.  Shared memory
    // answers as a local kernel does at once: exactly one send succeeds
    // (a FIN), or ECONNRESET comes first (the dead end left bytes unread).
    size_t first_fail = 0;
    while (first_fail < sends.size() && sends[first_fail] == "ok") ++first_fail;
    ASSERT_LT(first_fail, sends.size());
    if (c.shm) {
      EXPECT_LE(first_fail, 1u);
    }
    for (size_t i = first_fail; i < sends.size(); ++i) {
      EXPECT_TRUE(sends[i] == "EPIPE" || (i == first_fail && sends[i] == "ECONNRESET"))
          << "send #" << i << ": " << sends[i];
    }
    EXPECT_EQ(sends.back(), "EPIPE");
  }
  // Without MSG_NOSIGNAL: EPIPE plus SIGPIPE, for send() and write().
  EXPECT_EQ(s.One("signal_send").Get("ret"), "-1");
  EXPECT_EQ(s.One("signal_send").Get("errno"), "EPIPE");
  EXPECT_EQ(s.One("signal_send").Int("sigpipe"), 1);
  EXPECT_EQ(s.One("signal_write").Get("ret"), "-1");
  EXPECT_EQ(s.One("signal_write").Get("errno"), "EPIPE");
  EXPECT_EQ(s.One("signal_write").Int("sigpipe"), 2);

  // Cleanup: close succeeded, nothing of the connection mapped, its files
  // gone.  With pools (fifo_bridge/shm_pool.h) a surviving client keeps
  // its own pool mapped after the close (that is the point of a pool), no
  // offer name points into it, and its file goes at the survivor's exit; a
  // surviving server has dropped the dead client's pool, mapping and file,
  // by the end of its close.
  EXPECT_EQ(s.One("closed").Get("ret"), "0");
  const int own_pool_maps = static_cast<int>(s.One("closed").Int("own_pool_maps"));
  EXPECT_EQ(s.One("closed").Int("maps"), own_pool_maps) << "mappings of the peer's left";
  if (kill_client) {
    EXPECT_EQ(own_pool_maps, 0);  // a server makes no pool
  }
  const char* pool_switch = getenv("VSOCKET_SHM_POOL");
  const bool pools = pool_switch == nullptr || std::string(pool_switch) != "0";
  if (c.shm && !kill_client) {
    EXPECT_EQ(own_pool_maps, pools ? 1 : 0) << "a client's own pool, VSOCKET_SHM_POOL "
                                            << (pool_switch ? pool_switch : "unset");
  }
  const std::vector<Record> mapped = s.All("mapped");
  if (c.shm) {
    EXPECT_GE(s.One("ready").Int("mappings"), 1) << "shm connection with no ring mapping?";
  } else {
    EXPECT_EQ(s.One("ready").Int("mappings"), 0);
  }
  for (const Record& m : mapped) {
    const std::string path = m.Get("path");
    EXPECT_TRUE(path.starts_with(ShmDir(getuid()) + "/")) << path;
    // (The survivor has exited by now: its own pool went at its exit.)
    EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " still exists after close";
    if (m.Get("own_pool") == "1") {
      const std::string pool = path.substr(path.rfind('/') + 1);
      EXPECT_EQ(OffersNaming(pool), std::vector<std::string>{})
          << "offer names still point into " << pool << " after close";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PeerKilledTest,
    testing::Values(KillCase{Victim::kClient, Flow::kStreaming, true},
                    KillCase{Victim::kServer, Flow::kStreaming, true},
                    KillCase{Victim::kClient, Flow::kStalled, true},
                    KillCase{Victim::kServer, Flow::kStalled, true},
                    KillCase{Victim::kClient, Flow::kStreaming, false},
                    KillCase{Victim::kServer, Flow::kStalled, false}),
    CaseName);

}  // namespace
}  // namespace vsocket_test
