// The live statistics page (vsocket/live_stats.h) and its reader
// (tools/live_page_reader.h), in one process: a real loopback TCP
// connection gets a slot, its counters show through the reader, closing it
// folds them into the totals; then copies of the page with forged fields
// are refused or bounded, never trusted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fifo_bridge/shm_reasons.h"
#include "tools/live_page_reader.h"
#include "vsocket/live_stats.h"
#include "vsocket/stats.h"

namespace vsocket {
namespace {

// A connected loopback TCP pair; the client end is returned in *client.
int ConnectedPair(int* client) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  *client = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  int server = accept(listener, nullptr, nullptr);
  close(listener);
  return server;
}

std::string PagePath() {
  return LiveStatsDirectory() + "/stat-" + std::to_string(getpid());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `bytes` as a page file of this (live) process under another name
// the reader accepts, and reads it.  The name is this process's own: ctest
// runs the tests of this file in parallel processes.
bool ReadForged(const std::string& bytes, vsocket_stat::Process* out, std::string* why) {
  std::string path = LiveStatsDirectory() + "/forged-page-" + std::to_string(getpid());
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  chmod(path.c_str(), 0600);
  bool stale = false;
  bool ok = vsocket_stat::ReadPage(path, out, why, &stale);
  EXPECT_FALSE(stale);
  unlink(path.c_str());
  return ok;
}

class LivePage : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = ConnectedPair(&client_);
    LiveSlotIdentity id;
    id.fd = client_;
    id.tcp_fd = client_;
    id.kind = TransportKind::kTcp;
    id.reason = FallbackReason::kPeerNotVsocket;
    id.rule_line = 7;
    slot_ = LiveSlotOpen(id);
    ASSERT_NE(slot_, nullptr);
  }
  void TearDown() override {
    LiveSlotClose(slot_);
    close(client_);
    close(server_);
  }
  int client_ = -1, server_ = -1;
  LiveSlot* slot_ = nullptr;
};

TEST_F(LivePage, ShowsTheConnectionAndItsBytes) {
  StatsBytesSent(slot_, TransportKind::kTcp, 1000);
  StatsBytesReceived(slot_, TransportKind::kTcp, 250);
  LiveSlotAddFlags(slot_, kLiveShutWrite);
  vsocket_stat::Process p;
  std::string why;
  bool stale = false;
  ASSERT_TRUE(vsocket_stat::ReadPage(PagePath(), &p, &why, &stale)) << why;
  EXPECT_EQ(p.pid, getpid());
  EXPECT_EQ(p.program, "live_page_test");
  const vsocket_stat::Connection* mine = nullptr;
  for (const auto& c : p.connections)
    if (c.fd == client_) mine = &c;
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->transport, "tcp");
  EXPECT_EQ(mine->fallback_reason, "peer_not_vsocket");
  EXPECT_EQ(mine->rule_line, 7u);
  EXPECT_EQ(mine->state, "shut_wr");
  EXPECT_EQ(mine->role, "client");
  EXPECT_EQ(mine->bytes_sent, 1000u);
  EXPECT_EQ(mine->bytes_received, 250u);
  EXPECT_EQ(mine->local.rfind("127.0.0.1:", 0), 0u) << mine->local;
  EXPECT_EQ(mine->peer.rfind("127.0.0.1:", 0), 0u) << mine->peer;
  EXPECT_GE(p.transports["tcp"].bytes_sent, 1000u);
}

TEST_F(LivePage, ClosingFoldsTheBytesIntoTheTotals) {
  LiveHeader* h = LiveStatsHeader();
  uint64_t before = h->kinds[0].bytes_sent.load();
  StatsBytesSent(slot_, TransportKind::kTcp, 4096);
  EXPECT_EQ(h->kinds[0].bytes_sent.load(), before);  // still the slot's
  LiveSlotClose(slot_);
  slot_ = nullptr;
  EXPECT_EQ(h->kinds[0].bytes_sent.load(), before + 4096);
  EXPECT_NE(StatsJson().find("\"tcp\""), std::string::npos);
}

// A forked child rebuilds its free-slot list from the slots' states.  It
// keeps the parent's list when no thread of the parent held its lock at the
// fork, so a slot closed before the fork is the child's next one, and the
// child's exit() leaves nothing for a leak checker (the sanitizer build
// fails the child's exit otherwise).
TEST_F(LivePage, AForkedChildReusesFreedSlotsAndLeaksNothing) {
  LiveSlotClose(slot_);
  LiveSlot* freed = slot_;
  slot_ = nullptr;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LiveSlotIdentity id;
    id.fd = client_;
    id.tcp_fd = client_;
    id.kind = TransportKind::kTcp;
    LiveSlot* again = LiveSlotOpen(id);
    int code = again == freed ? 0 : 3;
    LiveSlotClose(again);
    exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A backend's reason has a number only in this process (registration
// order): the page names it, and the reader goes by the page's name.
TEST_F(LivePage, ARegisteredReasonShowsByTheNameThePageGivesIt) {
  const FallbackReason claim_timeout = fifo::ShmReason().claim_timeout;
  ASSERT_GE(static_cast<int>(claim_timeout), static_cast<int>(FallbackReason::kFirstRegistered));
  LiveSlotSetTransport(slot_, TransportKind::kTcp, claim_timeout);
  StatsFallback(claim_timeout, nullptr);
  vsocket_stat::Process p;
  std::string why;
  bool stale = false;
  ASSERT_TRUE(vsocket_stat::ReadPage(PagePath(), &p, &why, &stale)) << why;
  const vsocket_stat::Connection* mine = nullptr;
  for (const auto& c : p.connections)
    if (c.fd == client_) mine = &c;
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->fallback_reason, "claim_timeout");
  EXPECT_GE(p.fallback_reasons["claim_timeout"], 1u);
  EXPECT_NE(StatsJson().find("\"claim_timeout\":"), std::string::npos);

  // A writer that registered its reasons in another order gave the same
  // number another name: the reader shows the writer's.
  std::string page = ReadAll(PagePath());
  size_t name_at = offsetof(LiveHeader, reason_names) +
                   static_cast<size_t>(claim_timeout) * kLiveNameBytes;
  std::string other(kLiveNameBytes, '\0');
  other.replace(0, 11, "other_order");
  page.replace(name_at, kLiveNameBytes, other);
  vsocket_stat::Process forged;
  ASSERT_TRUE(ReadForged(page, &forged, &why)) << why;
  mine = nullptr;
  for (const auto& c : forged.connections)
    if (c.fd == client_) mine = &c;
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->fallback_reason, "other_order");
  EXPECT_GE(forged.fallback_reasons["other_order"], 1u);
  EXPECT_EQ(forged.fallback_reasons.count("claim_timeout"), 0u);
}

TEST_F(LivePage, ForgedPagesAreRefusedOrBounded) {
  const std::string page = ReadAll(PagePath());
  ASSERT_GE(page.size(), kLiveHeaderBytes + kLiveChunkBytes);
  vsocket_stat::Process p;
  std::string why;
  ASSERT_TRUE(ReadForged(page, &p, &why)) << why;

  std::string bad = page;
  bad[0] ^= 1;  // magic
  EXPECT_FALSE(ReadForged(bad, &p, &why));
  bad = page;
  bad[8] = 2;  // version
  EXPECT_FALSE(ReadForged(bad, &p, &why));
  EXPECT_FALSE(ReadForged(page.substr(0, 100), &p, &why));  // shorter than a header

  // chunks and slots_used past what the file holds: bounded by its size.
  bad = page;
  uint32_t huge = 0xffffffffu;
  std::memcpy(&bad[offsetof(LiveHeader, chunks)], &huge, 4);
  std::memcpy(&bad[offsetof(LiveHeader, slots_used)], &huge, 4);
  p = {};
  EXPECT_TRUE(ReadForged(bad, &p, &why)) << why;
  EXPECT_LE(p.connections.size(), kLiveSlotsPerChunk);

  // A slot whose seqlock stays odd is left out; a ring fill past the ring
  // is clamped; a kind or reason out of range is named "unknown".
  size_t first_slot = kLiveHeaderBytes;
  bad = page;
  uint32_t odd = 3;
  std::memcpy(&bad[first_slot + offsetof(LiveSlot, seq)], &odd, 4);
  p = {};
  ASSERT_TRUE(ReadForged(bad, &p, &why)) << why;
  vsocket_stat::Process whole;
  ASSERT_TRUE(ReadForged(page, &whole, &why));
  EXPECT_EQ(p.connections.size() + 1, whole.connections.size());

  bad = page;
  uint32_t ring = 4096, kind = 99, reason = 1000;
  uint64_t fill = ~0ull;
  std::memcpy(&bad[first_slot + offsetof(LiveSlot, ring_bytes)], &ring, 4);
  std::memcpy(&bad[first_slot + offsetof(LiveSlot, kind)], &kind, 4);
  std::memcpy(&bad[first_slot + offsetof(LiveSlot, reason)], &reason, 4);
  std::memcpy(&bad[first_slot + offsetof(LiveSlot, send_ring_fill)], &fill, 8);
  p = {};
  ASSERT_TRUE(ReadForged(bad, &p, &why)) << why;
  bool seen = false;
  for (const auto& c : p.connections) {
    if (c.ring_bytes != 4096) continue;
    seen = true;
    EXPECT_EQ(c.ring_fill, 4096u);
    EXPECT_EQ(c.transport, "unknown");
    EXPECT_EQ(c.fallback_reason, "unknown");
  }
  EXPECT_TRUE(seen);
}

// Another process of the user truncates the page and writes it back, over
// and over, while the reader reads it: every read gives the page or a
// reason, and the reader never dies (a mapped page died of SIGBUS here).
TEST_F(LivePage, APageTruncatedWhileReadGivesAReasonNotASignal) {
  const std::string page = ReadAll(PagePath());
  ASSERT_GE(page.size(), kLiveHeaderBytes + kLiveChunkBytes);
  std::string path = LiveStatsDirectory() + "/truncated-page";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(page.data(), static_cast<std::streamsize>(page.size()));
  }
  chmod(path.c_str(), 0600);
  pid_t truncator = fork();
  ASSERT_GE(truncator, 0);
  if (truncator == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the reader may die of the fault
    if (getppid() == 1) _exit(1);
    int fd = open(path.c_str(), O_WRONLY);
    for (;;) {  // until killed
      if (ftruncate(fd, 0) != 0) _exit(1);
      if (pwrite(fd, page.data(), page.size(), 0) != static_cast<ssize_t>(page.size()))
        _exit(1);
    }
  }
  int whole = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    vsocket_stat::Process p;
    std::string why;
    bool stale = false;
    if (vsocket_stat::ReadPage(path, &p, &why, &stale)) {
      ++whole;
      EXPECT_EQ(p.pid, getpid());
    } else {
      ++refused;
      EXPECT_FALSE(why.empty());
      EXPECT_FALSE(stale) << why;
    }
  }
  kill(truncator, SIGKILL);
  int status = 0;
  waitpid(truncator, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the truncator stopped early: " << status;
  EXPECT_EQ(whole + refused, 3000);
  printf("reads: %d whole, %d refused while truncated\n", whole, refused);
  // How many reads above found the page whole is the scheduler's choice
  // (0 of 3000 seen on a loaded machine: the truncator's loop leaves the
  // file whole only between two system calls). Once it is written back for
  // good, the same reader must take it.
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(page.data(), static_cast<std::streamsize>(page.size()));
  }
  vsocket_stat::Process p;
  std::string why;
  bool stale = false;
  EXPECT_TRUE(vsocket_stat::ReadPage(path, &p, &why, &stale)) << why;
  EXPECT_EQ(p.pid, getpid());
  unlink(path.c_str());
}

// Two PID namespaces sharing /dev/shm (containers on the host network with
// the host's /dev/shm) number processes apart: each keeps its pages in its
// own directory, so a reader here never takes the other's page for the
// stale page of one of our pids (and removes it).
TEST(LivePageNamespaces, APageOfAnotherPidNamespaceIsNeitherSeenNorRemovedHere) {
  if (geteuid() != 0) GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWPID) != 0) _exit(2);
    pid_t inner = fork();
    if (inner == 0) {
      // pid 1 of the new namespace: a number our namespace's init has too.
      if (getpid() != 1 || LiveStatsHeader() == nullptr) _exit(3);
      std::string page = LiveStatsDirectory() + "/stat-1";
      if (access(page.c_str(), F_OK) != 0) _exit(4);
      std::string dir = LiveStatsDirectory();
      if (write(to_parent[1], dir.data(), dir.size()) != static_cast<ssize_t>(dir.size()))
        _exit(5);
      close(to_parent[1]);
      char byte;
      if (read(to_child[0], &byte, 1) != 1) _exit(6);
      _exit(access(page.c_str(), F_OK) == 0 ? 0 : 7);  // still there
    }
    int status = 0;
    if (inner < 0 || waitpid(inner, &status, 0) != inner) _exit(8);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 9);
  }
  close(to_parent[1]);
  close(to_child[0]);
  char dir[512];
  ssize_t n = read(to_parent[0], dir, sizeof(dir));
  ASSERT_GT(n, 0);
  const std::string theirs(dir, static_cast<size_t>(n));
  EXPECT_NE(theirs, LiveStatsDirectory());
  EXPECT_EQ(LiveStatsDirectory(), vsocket_stat::UserDirectory());
  // vsocket-stat here: it lists and sweeps our namespace's pages only.
  std::vector<vsocket_stat::Process> seen =
      vsocket_stat::ReadPages(vsocket_stat::UserDirectory(), 1, /*remove_stale=*/true);
  EXPECT_TRUE(seen.empty());
  ASSERT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(to_parent[0]);
  close(to_child[1]);
}

}  // namespace
}  // namespace vsocket
