// The pieces a new program image rebuilds a shared-memory connection from
// after exec: the segment's kept descriptor, the SideState (in the segment's
// slot, or a memfd for sealed segments) and the doorbell's bound sockets.  Each accepts what it made and rejects the rest.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/side_state.h"

namespace vsocket::fifo {
namespace {

std::string Key(const char* name) {
  return std::string("t-") + name + "-" + std::to_string(::getpid());
}

TEST(ExecHandoverPiecesTest, SegmentIsAdoptedThroughItsDescriptorOnceClaimed) {
  std::string key = Key("adopt");
  std::unique_ptr<ShmSegment> client, adopted;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 65536, &client), 0);
  EXPECT_EQ(client->fd(), -1);  // held by its name, no descriptor
  int fd = client->DescriptorForExec();  // the name opened again
  ASSERT_GE(fd, 0);
  EXPECT_EQ(client->fd(), fd);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  // Unclaimed: refused (and the descriptor given is closed).
  EXPECT_EQ(ShmSegment::AdoptInherited(::dup(fd), key, &adopted), -EINVAL);
  client->header()->claim.store(kClaimed);
  ASSERT_EQ(ShmSegment::AdoptInherited(::dup(fd), key, &adopted), 0);
  EXPECT_EQ(adopted->capacity(), 65536u);
  EXPECT_EQ(adopted->fd(), -1);  // the name still names it: held by the name
  client->data(Direction::kServerToClient)[7] = 9;
  EXPECT_EQ(adopted->data(Direction::kServerToClient)[7], 9);
  // Once the name is gone (the peer died and unlinked it), the adopted
  // segment keeps the inherited descriptor: its only way on.
  client->Unlink();
  std::unique_ptr<ShmSegment> unnamed;
  ASSERT_EQ(ShmSegment::AdoptInherited(::dup(fd), key, &unnamed), 0);
  EXPECT_GE(unnamed->fd(), 0);
  EXPECT_EQ(unnamed->DescriptorForExec(), unnamed->fd());
}

// The name goes with the second side's release, or with the first's when
// the peer is known gone; never while the other side may still need it.
TEST(ExecHandoverPiecesTest, TheNameLivesUntilBothSidesRelease) {
  std::string key = Key("release");
  std::string path = "/dev/shm/vsocket-" + std::to_string(::geteuid()) + "/" + key;
  std::unique_ptr<ShmSegment> client, server;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 65536, &client), 0);
  ASSERT_EQ(ShmSegment::OpenOffer(key, &server), 0);
  EXPECT_EQ(server->fd(), -1);
  client->header()->claim.store(kClaimed);
  struct stat st;
  server->ReleaseName(/*client=*/false, /*peer_gone=*/false);
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << "the client may still exec";
  client->ReleaseName(/*client=*/true, /*peer_gone=*/false);
  EXPECT_NE(::stat(path.c_str(), &st), 0);

  std::unique_ptr<ShmSegment> again;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 65536, &again), 0);
  again->ReleaseName(/*client=*/true, /*peer_gone=*/true);
  EXPECT_NE(::stat(path.c_str(), &st), 0);
}

TEST(ExecHandoverPiecesTest, SegmentAdoptionRejectsOtherFiles) {
  std::unique_ptr<ShmSegment> adopted;
  int memfd = ::memfd_create("not-a-segment", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(::ftruncate(memfd, 1 << 20), 0);
  EXPECT_EQ(ShmSegment::AdoptInherited(memfd, "", &adopted), -EINVAL);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_EQ(ShmSegment::AdoptInherited(sv[0], "", &adopted), -EINVAL);
  ::close(sv[1]);
  EXPECT_EQ(adopted, nullptr);
}

TEST(ExecHandoverPiecesTest, SideStateIsSharedThroughItsMemfd) {
  int fd = -1;
  SideState* state = CreateSideState(&fd);
  ASSERT_NE(state, nullptr);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  state->head = 12345;
  state->holders.store(3);
  SideState* again = MapInheritedSideState(fd);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->head, 12345u);
  EXPECT_EQ(again->holders.load(), 3u);
  {
    SideLock lock(&again->send_lock);  // the process-shared mutex works
  }
  DestroySideState(again, -1);
  // Its size cannot change under a mapping.
  EXPECT_NE(::ftruncate(fd, 0), 0);
  DestroySideState(state, fd);
}

// A segment private to the user holds each side's SideState in a slot of
// its header page: the segment's descriptor alone carries it across exec.
TEST(ExecHandoverPiecesTest, SideStateInTheSegmentSlotCrossesWithTheSegment) {
  std::string key = Key("slot");
  std::unique_ptr<ShmSegment> client, adopted;
  ASSERT_EQ(ShmSegment::CreateOffer(key, 65536, &client), 0);
  int fd = client->DescriptorForExec();
  ASSERT_GE(fd, 0);
  client->Unlink();
  EXPECT_FALSE(client->sealed());
  SideState* mine = InitSideStateIn(client->side_state_slot(/*client=*/true));
  SideState* theirs = InitSideStateIn(client->side_state_slot(/*client=*/false));
  mine->head = 777;
  mine->holders.store(2);
  EXPECT_EQ(theirs->head, 0u);  // the two sides' slots do not overlap
  EXPECT_EQ(theirs->holders.load(), 1u);
  EXPECT_EQ(client->header()->magic, kSegmentMagic);  // nor touch the header
  client->header()->claim.store(kClaimed);
  ASSERT_EQ(ShmSegment::AdoptInherited(::dup(fd), key, &adopted), 0);
  auto* again = static_cast<SideState*>(adopted->side_state_slot(true));
  EXPECT_EQ(again->head, 777u);
  EXPECT_EQ(again->holders.load(), 2u);
  {
    SideLock lock(&again->send_lock);  // the process-shared mutex works
  }
  SideLock lock(&mine->send_lock, /*try_only=*/true);
  EXPECT_TRUE(lock.owns_lock());  // released through the other mapping
}

// Another user may map a sealed segment: its side state stays out of it.
TEST(ExecHandoverPiecesTest, SealedSegmentsSaySo) {
  std::unique_ptr<ShmSegment> sealed, handed;
  ASSERT_EQ(ShmSegment::CreateSealedOffer(65536, &sealed), 0);
  EXPECT_TRUE(sealed->sealed());
  ASSERT_EQ(ShmSegment::AdoptHandedOffer(::dup(sealed->fd()), &handed), 0);
  EXPECT_TRUE(handed->sealed());
}

TEST(ExecHandoverPiecesTest, SideStateRejectsUnsealedOrWrongSizedFiles) {
  int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, kSideStateBytes), 0);
  EXPECT_EQ(MapInheritedSideState(unsealed), nullptr);
  EXPECT_EQ(errno, EINVAL);
  int small = ::memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(small, 0);
  ASSERT_EQ(::fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_EQ(MapInheritedSideState(small), nullptr);
  ::close(unsealed);
  ::close(small);
}

TEST(ExecHandoverPiecesTest, DoorbellIsRebuiltFromItsBoundSockets) {
  std::string key = Key("bell");
  Doorbell client, server;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  ASSERT_EQ(server.Open(key, 's', 'c'), 0);
  int wait_copy = ::dup(server.wait_fd());
  int unbound = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(unbound, 0);
  {
    Doorbell wrong_role;
    EXPECT_EQ(wrong_role.AdoptInherited(wait_copy, 'c'), -EINVAL);
    Doorbell not_a_wait_socket;
    EXPECT_EQ(not_a_wait_socket.AdoptInherited(unbound, 's'), -EINVAL);
  }
  ::close(unbound);
  Doorbell adopted;
  ASSERT_EQ(adopted.AdoptInherited(wait_copy, 's'), 0);
  EXPECT_EQ(adopted.my_wake_name(), "s" + key);
  // It reaches the peer by name, and the peer reaches it.
  ASSERT_EQ(adopted.RingPeer(), 0);
  struct pollfd pfd = {client.wait_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 1000), 1);
  ASSERT_EQ(client.RingPeer(), 0);
  pfd = {adopted.wait_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 1000), 1);
}

}  // namespace
}  // namespace vsocket::fifo
