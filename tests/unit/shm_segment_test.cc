// ShmSegment: private directory and file modes, validation of offers,
// stale-name reclamation, and unlinking.
#include "fifo_bridge/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "base/pid_namespace.h"

namespace vsocket::fifo {
namespace {

std::string Dir() { return "/dev/shm/vsocket-" + std::to_string(::geteuid()); }
std::string Key(const char* name) {
  return std::string("t-") + name + "-" + std::to_string(::getpid());
}

TEST(ShmSegmentTest, OfferIsPrivateAndClaimable) {
  std::string key = Key("offer");
  std::unique_ptr<ShmSegment> client, server;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 65536, &client), 0);
  struct stat st;
  ASSERT_EQ(::stat(Dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((Dir() + "/" + key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  EXPECT_EQ(server->capacity(), 65536u);
  EXPECT_EQ(server->header()->claim.load(), kOffered);
  // Both map the same memory.
  server->data(Direction::kClientToServer)[5] = 42;
  EXPECT_EQ(client->data(Direction::kClientToServer)[5], 42);
  server->Unlink();
  EXPECT_NE(::access((Dir() + "/" + key).c_str(), F_OK), 0);
  std::unique_ptr<ShmSegment> again;
  EXPECT_EQ(ShmSegment::OpenOffer(key, &again), -ENOENT);
}

TEST(ShmSegmentTest, LiveNameIsNotStolen) {
  std::string key = Key("live");
  std::unique_ptr<ShmSegment> first, second;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 4096, &first), 0);
  EXPECT_EQ(ShmSegment::CreateOffer(key, 4096, &second), -EADDRINUSE);
  first->Unlink();
}

TEST(ShmSegmentTest, StaleNameOfDeadProcessIsReclaimed) {
  std::string key = Key("stale");
  pid_t child = ::fork();
  if (child == 0) {
    std::unique_ptr<ShmSegment> s;
    ::_exit(ShmSegment::CreateOffer(key, 4096, &s) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::unique_ptr<ShmSegment> mine;
  EXPECT_EQ(ShmSegment::CreateOffer(key, 4096, &mine), 0);
  mine->Unlink();
}

// A client of another PID namespace (a host-network container sharing
// /dev/shm) names a pid we cannot judge: its file is left to its own
// namespace's sweep, and a server of ours does not claim its offer.
TEST(ShmSegmentTest, ANameOfAnotherPidNamespaceIsLeftToIt) {
  std::string key = Key("otherns");
  const uint64_t ours = sys::PidNamespaceId();
  ASSERT_NE(ours, 0u) << "no /proc/self/ns/pid";
  pid_t child = ::fork();
  if (child == 0) {
    std::unique_ptr<ShmSegment> s;
    if (ShmSegment::CreateOffer(key, 4096, &s) != 0) ::_exit(1);
    if (s->header()->client_pid_namespace != ours) ::_exit(2);
    s->header()->client_pid_namespace = ours + 1;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::unique_ptr<ShmSegment> mine, server;
  EXPECT_EQ(ShmSegment::CreateOffer(key, 4096, &mine), -EADDRINUSE);
  SweepDeadOffers();
  ASSERT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  EXPECT_FALSE(server->ClientInThisPidNamespace());
  // Named in ours, the same file is a dead client's, and reclaimed.
  server->header()->client_pid_namespace = ours;
  EXPECT_TRUE(server->ClientInThisPidNamespace());
  server.reset();
  EXPECT_EQ(ShmSegment::CreateOffer(key, 4096, &mine), 0);
  mine->Unlink();
}

TEST(ShmSegmentTest, MalformedOfferIsRejected) {
  std::string key = Key("bad");
  std::string path = Dir() + "/" + key;
  std::unique_ptr<ShmSegment> ok;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 4096, &ok), 0);
  // Claim a capacity the file is not big enough for.
  ok->header()->ring_capacity = 1 << 20;
  std::unique_ptr<ShmSegment> server;
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  ok->header()->ring_capacity = 4096;
  ok->header()->magic = 0;
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EINVAL);
  ok->Unlink();
  // A world-readable file is not trusted.
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  ::fchmod(fd, 0644);
  ::close(fd);
  EXPECT_EQ(ShmSegment::OpenOffer(key, &server), -EPERM);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace vsocket::fifo
