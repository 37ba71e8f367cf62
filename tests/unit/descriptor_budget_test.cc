// The descriptor budget (fifo_bridge/descriptor_budget.h) counts each
// connection's private descriptors by the kind of its segment: a named one
// holds 1, a sealed one 3.  With the soft and hard RLIMIT_NOFILE equal (a
// shell's `ulimit -n 256`), private descriptors share the program's table
// and may take VSOCKET_FD_SHARE percent of it (12: 30 of 256).
#include "fifo_bridge/descriptor_budget.h"

#include <sys/resource.h>

#include <vector>

#include <gtest/gtest.h>

namespace vsocket::fifo {
namespace {

class DescriptorBudget : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    struct rlimit equal = {256, 256};
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &equal), 0);
    ASSERT_EQ(ReservedConnections(), 0);
  }
  // The hard limit cannot be raised back without privilege; a test runner
  // as root gets it back, others keep 256 for the rest of this binary.
  void TearDown() override { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  struct rlimit saved_;
};

TEST_F(DescriptorBudget, SealedConnectionsCountThreeDescriptorsEach) {
  FallbackReason why = FallbackReason::kNone;
  std::vector<DescriptorReservation> held;
  for (int i = 0; i < 10; ++i) {
    held.push_back(DescriptorReservation::Take(kSealedSegmentFds, &why));
    ASSERT_TRUE(held.back()) << i;
  }
  EXPECT_EQ(ReservedConnections(), 10);
  EXPECT_EQ(ReservedDescriptors(), 30);
  // 30 of 30 taken: not even a named connection fits.
  EXPECT_FALSE(DescriptorReservation::Take(kNamedSegmentFds, &why));
  EXPECT_EQ(why, FallbackReason::kFdLimit);
  held.pop_back();
  EXPECT_EQ(ReservedDescriptors(), 27);
  // Room for three named ones now.
  for (int i = 0; i < 3; ++i) {
    held.push_back(DescriptorReservation::Take(kNamedSegmentFds, &why));
    ASSERT_TRUE(held.back()) << i;
  }
  EXPECT_FALSE(DescriptorReservation::Take(kNamedSegmentFds, &why));
  held.clear();
  EXPECT_EQ(ReservedConnections(), 0);
  EXPECT_EQ(ReservedDescriptors(), 0);
}

TEST_F(DescriptorBudget, AClaimGrowsToASealedOneOnlyIfThatFits) {
  FallbackReason why = FallbackReason::kNone;
  std::vector<DescriptorReservation> held;
  for (int i = 0; i < 28; ++i) held.push_back(DescriptorReservation::Take(kNamedSegmentFds, &why));
  DescriptorReservation claim = DescriptorReservation::Take(kNamedSegmentFds, &why);
  ASSERT_TRUE(claim);
  EXPECT_EQ(ReservedDescriptors(), 29);
  // A sealed offer needs 2 more; only 1 is left.
  EXPECT_FALSE(claim.GrowTo(kSealedSegmentFds, &why));
  EXPECT_EQ(why, FallbackReason::kFdLimit);
  EXPECT_EQ(ReservedDescriptors(), 29);
  held.pop_back();
  EXPECT_TRUE(claim.GrowTo(kSealedSegmentFds, &why));
  EXPECT_EQ(ReservedDescriptors(), 30);
  EXPECT_EQ(ReservedConnections(), 28);
  // Moving keeps the count; giving returns all three.
  DescriptorReservation moved = std::move(claim);
  EXPECT_FALSE(claim);
  moved.Give();
  EXPECT_EQ(ReservedDescriptors(), 27);
  held.clear();
  EXPECT_EQ(ReservedDescriptors(), 0);
}

TEST_F(DescriptorBudget, AnAdoptedConnectionIsCountedWhateverTheBudget) {
  FallbackReason why = FallbackReason::kNone;
  std::vector<DescriptorReservation> held;
  for (int i = 0; i < 10; ++i) held.push_back(DescriptorReservation::Take(kSealedSegmentFds, &why));
  DescriptorReservation adopted = DescriptorReservation::Force(kSealedSegmentFds);
  EXPECT_TRUE(adopted);
  EXPECT_EQ(ReservedDescriptors(), 33);
  EXPECT_EQ(ReservedConnections(), 11);
}

}  // namespace
}  // namespace vsocket::fifo
