// Pools (fifo_bridge/shm_pool.h): the offer name's strict parser, pooled
// offers as ShmSegments (claim, generation, reuse after both sides let go,
// no reuse before), a dead owner's pool dropped by a server with its last
// slice, fork (a child makes its own pool), and a truncated pool resetting
// its own slices only.
#include "fifo_bridge/shm_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_segment.h"

namespace vsocket::fifo {
namespace {

constexpr uint64_t kCap = 65536;

std::string Dir() { return ShmDirectory(::geteuid()); }
std::string Key(const char* name, int i = 0) {
  return std::string("t-pool-") + name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(i);
}
std::string Target(const std::string& key) {
  char buf[256];
  ssize_t n = ::readlink((Dir() + "/" + key).c_str(), buf, sizeof(buf));
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

const char kPool[] = "pool-123-0123456789abcdef-65536";

TEST(ShmPoolNameTest, WellFormedNamesParse) {
  uint32_t pid = 0;
  uint64_t cap = 0;
  ASSERT_TRUE(ParsePoolName(kPool, &pid, &cap));
  EXPECT_EQ(pid, 123u);
  EXPECT_EQ(cap, 65536u);
  PoolOfferTarget t;
  ASSERT_TRUE(ParsePoolOfferTarget(std::string(kPool) + "#0#0", &t));
  EXPECT_EQ(t.pool, kPool);
  EXPECT_EQ(t.slice, 0u);
  EXPECT_EQ(t.generation, 0u);
  ASSERT_TRUE(ParsePoolOfferTarget(std::string(kPool) + "#255#4294967295", &t));
  EXPECT_EQ(t.slice, 255u);
  EXPECT_EQ(t.generation, 4294967295u);
  EXPECT_EQ(FormatPoolOfferTarget(kPool, 7, 9), std::string(kPool) + "#7#9");
}

TEST(ShmPoolNameTest, MalformedNamesAreRejected) {
  const std::string p = kPool;
  const char* const bad_pools[] = {
      "", "pool-", "pool-123", "pool-123-0123456789abcdef", "pool-123-0123456789abcdef-",
      "pool-0-0123456789abcdef-65536",          // pid 0
      "pool-0123-0123456789abcdef-65536",       // leading zero
      "pool-2147483648-0123456789abcdef-65536", // past a pid
      "pool-123-0123456789ABCDEF-65536",        // upper case
      "pool-123-0123456789abcde-65536",         // 15 digits
      "pool-123-0123456789abcdef0-65536",       // 17 digits
      "pool-123-0123456789abcdef-65535",        // not a ring capacity
      "pool-123-0123456789abcdef-065536",
      "pool-123-0123456789abcdef-65536x",
      "pool-123-0123456789abcdef-99999999999999999999999",
      "../pool-123-0123456789abcdef-65536",
      "pool-123-0123456789abcdef-65536/..",
      "vsocket-123-0123456789abcdef-65536",
      "pool--123-0123456789abcdef-65536",
      "pool-+123-0123456789abcdef-65536",
  };
  for (const char* name : bad_pools) {
    uint32_t pid;
    uint64_t cap;
    EXPECT_FALSE(ParsePoolName(name, &pid, &cap)) << name;
    PoolOfferTarget t;
    EXPECT_FALSE(ParsePoolOfferTarget(std::string(name) + "#1#1", &t)) << name;
  }
  const std::string bad_targets[] = {
      p, p + "#", p + "#1", p + "#1#", p + "##1", p + "#1##1", p + "#1#1#",
      p + "#256#1",          // past kPoolSlices
      p + "#01#1", p + "#1#01", p + "#-1#1", p + "#1#-1",
      p + "#1#4294967296",   // past 32 bits
      p + "#1#1 ", p + " #1#1", p + "#1#1\n", std::string(p + "#1#1").insert(5, 1, '\0'),
      "/dev/shm/" + p + "#1#1", "#1#1", p + "#99999999999999999999#1",
  };
  for (const std::string& target : bad_targets) {
    PoolOfferTarget t;
    EXPECT_FALSE(ParsePoolOfferTarget(target, &t)) << target;
  }
}

TEST(ShmPoolTest, PooledOfferIsASymlinkToASlice) {
  std::string key = Key("offer");
  std::unique_ptr<ShmSegment> client, server;
  ASSERT_EQ(ShmSegment::CreateOffer(key, kCap, &client, ::geteuid(), /*pooled=*/true), 0);
  ASSERT_TRUE(client->pooled());
  struct stat st;
  ASSERT_EQ(::lstat((Dir() + "/" + key).c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  PoolOfferTarget t;
  ASSERT_TRUE(ParsePoolOfferTarget(Target(key), &t)) << Target(key);
  ASSERT_EQ(::stat((Dir() + "/" + t.pool).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(t.owner_pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(client->header()->slice_generation, t.generation);
  ASSERT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  ASSERT_TRUE(server->pooled());
  EXPECT_EQ(server->capacity(), kCap);
  EXPECT_EQ(server->header()->claim.load(), kOffered);
  server->data(Direction::kClientToServer)[5] = 42;
  EXPECT_EQ(client->data(Direction::kClientToServer)[5], 42);
  // Release: the second side unlinks the name.
  client->ReleaseName(true, false);
  EXPECT_EQ(::lstat((Dir() + "/" + key).c_str(), &st), 0);
  server->ReleaseName(false, false);
  EXPECT_NE(::lstat((Dir() + "/" + key).c_str(), &st), 0);
}

TEST(ShmPoolTest, ABadGenerationOrSliceIsRejected) {
  std::string key = Key("gen");
  std::unique_ptr<ShmSegment> client, server;
  ASSERT_EQ(ShmSegment::CreateOffer(key, kCap, &client, ::geteuid(), true), 0);
  PoolOfferTarget t;
  ASSERT_TRUE(ParsePoolOfferTarget(Target(key), &t));
  std::string path = Dir() + "/" + key;
  auto relink = [&](const std::string& target) {
    ::unlink(path.c_str());
    ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  };
  relink(FormatPoolOfferTarget(t.pool, t.slice, t.generation + 1));
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  relink(FormatPoolOfferTarget(t.pool, kPoolSlices - 1, t.generation));  // never carved
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  relink("pool-1-0000000000000000-65536#0#1");  // no such pool
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  relink("../../etc/passwd");
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  relink(std::string(300, 'a'));
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  relink(Target(key).empty() ? "" : FormatPoolOfferTarget(t.pool, t.slice, t.generation));
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  ::unlink(path.c_str());
}

// Claim, release both sides, the server lets go: the slice comes back with
// the next generation; not before.
TEST(ShmPoolTest, SliceIsReusedOnlyAfterBothSidesLetGo) {
  std::string key = Key("reuse");
  std::unique_ptr<ShmSegment> client, server;
  ASSERT_EQ(ShmSegment::CreateOffer(key, kCap, &client, ::geteuid(), true), 0);
  PoolOfferTarget first;
  ASSERT_TRUE(ParsePoolOfferTarget(Target(key), &first));
  ASSERT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  uint32_t offered = kOffered;
  ASSERT_TRUE(server->header()->claim.compare_exchange_strong(offered, kClaimed));
  server->header()->server_pid = static_cast<uint32_t>(::getpid());
  client->ReleaseName(true, false);
  client.reset();  // back to the owner, pending
  // The server still holds it: a new offer gets another slice.
  std::vector<std::unique_ptr<ShmSegment>> held;
  std::vector<PoolOfferTarget> targets;
  for (int i = 0; i < static_cast<int>(kPoolChunkSlices); ++i) {
    std::unique_ptr<ShmSegment> s;
    ASSERT_EQ(ShmSegment::CreateOffer(Key("reuse", i + 1), kCap, &s, ::geteuid(), true), 0);
    PoolOfferTarget t;
    ASSERT_TRUE(ParsePoolOfferTarget(Target(Key("reuse", i + 1)), &t));
    if (t.pool == first.pool) {
      EXPECT_NE(t.slice, first.slice);
    }
    s->Unlink();
    held.push_back(std::move(s));
  }
  server->ReleaseName(false, false);
  server.reset();  // detached
  held.clear();    // pending, never claimed: a second's quarantine
  // Carve the rest of the pool; the freed slice comes back with its next
  // generation once the carved ones are gone.
  bool reused = false;
  std::vector<std::unique_ptr<ShmSegment>> more;
  for (uint32_t i = 0; i < kPoolSlices + 1 && !reused; ++i) {
    std::unique_ptr<ShmSegment> s;
    std::string k = Key("more", static_cast<int>(i));
    ASSERT_EQ(ShmSegment::CreateOffer(k, kCap, &s, ::geteuid(), true), 0);
    PoolOfferTarget t;
    ASSERT_TRUE(ParsePoolOfferTarget(Target(k), &t));
    if (t.pool == first.pool && t.slice == first.slice) {
      EXPECT_EQ(t.generation, first.generation + 1);
      EXPECT_EQ(s->header()->claim.load(), kOffered);
      EXPECT_EQ(s->header()->released.load(), 0u);
      reused = true;
    }
    s->Unlink();
    more.push_back(std::move(s));
  }
  EXPECT_TRUE(reused);
}

// Whether /proc/self/maps has a line of the file `name` in our directory.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const std::string path = Dir() + "/" + name;
  while (std::getline(maps, line)) {
    if (line.find(path) != std::string::npos) return true;
  }
  return false;
}

// A server's cached mapping of a pool whose owner died (a zombie not yet
// reaped counts) goes with the release of its last slice there, and so
// does the pool's file; while another slice is in use, or while the owner
// lives, it stays.
TEST(ShmPoolTest, DeadOwnersPoolGoesWithItsLastSlice) {
  const std::string key_a = Key("dead", 1), key_b = Key("dead", 2);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<ShmSegment> a, b;
    if (ShmSegment::CreateOffer(key_a, kCap, &a, ::geteuid(), true) ||
        ShmSegment::CreateOffer(key_b, kCap, &b, ::geteuid(), true)) {
      ::_exit(1);
    }
    char c = 'r';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();  // until SIGKILL
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  PoolOfferTarget t;
  ASSERT_TRUE(ParsePoolOfferTarget(Target(key_a), &t));
  std::unique_ptr<ShmSegment> a, b;
  ASSERT_EQ(ShmSegment::OpenOffer(key_a, &a), 0);
  ASSERT_EQ(ShmSegment::OpenOffer(key_b, &b), 0);
  ASSERT_TRUE(Mapped(t.pool));

  // The owner lives: a mark and a release keep the mapping.
  a->NotePeerExited();
  a.reset();
  EXPECT_TRUE(Mapped(t.pool));
  ASSERT_EQ(ShmSegment::OpenOffer(key_a, &a), 0);

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info;  // dead, not reaped: a zombie
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  a->NotePeerExited();
  b->NotePeerExited();
  a.reset();  // b still uses the pool
  EXPECT_TRUE(Mapped(t.pool));
  b.reset();
  EXPECT_FALSE(Mapped(t.pool));
  struct stat st;
  EXPECT_NE(::lstat((Dir() + "/" + t.pool).c_str(), &st), 0) << t.pool << " still exists";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::unlink((Dir() + "/" + key_a).c_str());
  ::unlink((Dir() + "/" + key_b).c_str());
}

// A forked child's offers come from a pool of its own.
TEST(ShmPoolTest, ForkedChildMakesItsOwnPool) {
  std::string key = Key("parent");
  std::unique_ptr<ShmSegment> parent;
  ASSERT_EQ(ShmSegment::CreateOffer(key, kCap, &parent, ::geteuid(), true), 0);
  PoolOfferTarget mine;
  ASSERT_TRUE(ParsePoolOfferTarget(Target(key), &mine));
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<ShmSegment> s;
    std::string k = Key("child");
    if (ShmSegment::CreateOffer(k, kCap, &s, ::geteuid(), true) != 0) ::_exit(1);
    PoolOfferTarget t;
    if (!ParsePoolOfferTarget(Target(k), &t)) ::_exit(2);
    s->Unlink();
    ::_exit(t.pool != mine.pool && t.owner_pid == static_cast<uint32_t>(::getpid()) ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  parent->Unlink();
}

// Truncating one pool's file resets the connections in it (RESET in both
// rings of each slice, no SIGBUS) and leaves another pool's alone.
TEST(ShmPoolTest, TruncatedPoolResetsItsSlicesOnly) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Two pools: one of each ring size.
    std::unique_ptr<ShmSegment> a, b, other, a_server, other_server;
    if (ShmSegment::CreateOffer(Key("ta", 1), kCap, &a, ::geteuid(), true) ||
        ShmSegment::CreateOffer(Key("ta", 2), kCap, &b, ::geteuid(), true) ||
        ShmSegment::CreateOffer(Key("tb", 1), 2 * kCap, &other, ::geteuid(), true) ||
        ShmSegment::OpenOffer(Key("ta", 1), &a_server) ||
        ShmSegment::OpenOffer(Key("tb", 1), &other_server)) {
      ::_exit(1);
    }
    PoolOfferTarget t;
    if (!ParsePoolOfferTarget(Target(Key("ta", 1)), &t)) ::_exit(2);
    ::truncate((Dir() + "/" + t.pool).c_str(), 0);
    // Touch: the guard turns the SIGBUS into reset rings.
    a->data(Direction::kClientToServer)[0] = 1;
    auto reset = [](ShmSegment* s) {
      return (s->control(Direction::kClientToServer)->flags.load() & kReset) &&
             (s->control(Direction::kServerToClient)->flags.load() & kReset);
    };
    if (!reset(a.get()) || !reset(b.get())) ::_exit(3);
    // The server's mapping of the same pool: its next touch resets too.
    a_server->data(Direction::kServerToClient)[0] = 1;
    if (!reset(a_server.get())) ::_exit(4);
    // The other pool is untouched, in both mappings.
    other->data(Direction::kClientToServer)[0] = 7;
    if (reset(other.get()) || reset(other_server.get()) ||
        other_server->data(Direction::kClientToServer)[0] != 7) {
      ::_exit(5);
    }
    // A new offer of the lost pool's size gets a new pool.
    std::unique_ptr<ShmSegment> c;
    if (ShmSegment::CreateOffer(Key("ta", 3), kCap, &c, ::geteuid(), true)) ::_exit(6);
    PoolOfferTarget t3;
    if (!ParsePoolOfferTarget(Target(Key("ta", 3)), &t3) || t3.pool == t.pool) ::_exit(7);
    for (const char* k : {"ta", "tb"})
      for (int i = 1; i <= 3; ++i) ::unlink((Dir() + "/" + Key(k, i)).c_str());
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                              : "exit " + std::to_string(WEXITSTATUS(status)));
}

}  // namespace
}  // namespace vsocket::fifo
