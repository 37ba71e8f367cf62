// CopyUserBytes and GuardedUserCopy against a page the process may not
// touch: the count copied is what lies before the bad page (x86-64, the
// landing) or nothing (the portable guard), the bytes before it are
// written, and the process lives on.
#include "base/user_copy_guard.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace vsocket {
namespace {

class UserCopyGuardTest : public testing::Test {
 protected:
  void SetUp() override {
    InstallUserCopyGuard();
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // Two pages: the first readable and writable, the second inaccessible.
    void* m = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    base_ = static_cast<char*>(m);
    ASSERT_EQ(mprotect(base_ + page_, page_, PROT_NONE), 0);
  }
  void TearDown() override { munmap(base_, 2 * page_); }

  // What CopyUserBytes returns when `good` bytes lie before the bad page.
  size_t ExpectedCount(size_t good) const {
    return VSOCKET_COPY_USER_BY_LANDING ? good : 0;
  }

  size_t page_ = 0;
  char* base_ = nullptr;
};

TEST_F(UserCopyGuardTest, AWholeCopyReturnsItsLength) {
  std::vector<char> from(5000, 'a'), to(5000, 0);
  EXPECT_EQ(CopyUserBytes(to.data(), from.data(), from.size()), from.size());
  EXPECT_EQ(to, from);
  EXPECT_EQ(CopyUserBytes(to.data(), from.data(), 0), 0u);
}

TEST_F(UserCopyGuardTest, ASourceRunningIntoABadPageStopsThere) {
  const size_t good = 100;
  char* src = base_ + page_ - good;
  std::memset(src, 'x', good);
  std::vector<char> to(good + 300, 0);
  EXPECT_EQ(CopyUserBytes(to.data(), src, to.size()), ExpectedCount(good));
  if (VSOCKET_COPY_USER_BY_LANDING) {
    EXPECT_EQ(std::string(to.data(), good), std::string(good, 'x'));
    EXPECT_EQ(to[good], 0);
  }
}

TEST_F(UserCopyGuardTest, ADestinationRunningIntoABadPageStopsThere) {
  const size_t good = 64;
  char* dst = base_ + page_ - good;
  std::vector<char> from(good + 64, 'y');
  EXPECT_EQ(CopyUserBytes(dst, from.data(), from.size()), ExpectedCount(good));
  if (VSOCKET_COPY_USER_BY_LANDING)
    EXPECT_EQ(std::string(dst, good), std::string(good, 'y'));
}

TEST_F(UserCopyGuardTest, ANullSourceCopiesNothing) {
  char to[16] = {};
  EXPECT_EQ(CopyUserBytes(to, nullptr, sizeof(to)), 0u);
}

TEST_F(UserCopyGuardTest, GuardedUserCopyReportsTheFault) {
  char to[8];
  EXPECT_FALSE(GuardedUserCopy([&] { std::memcpy(to, base_ + page_, sizeof(to)); }));
  EXPECT_TRUE(GuardedUserCopy([&] { std::memcpy(to, base_, sizeof(to)); }));
}

TEST_F(UserCopyGuardTest, ManyFaultsInARowLeaveTheProcessWorking) {
  char to[32];
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(CopyUserBytes(to, base_ + page_, sizeof(to)), 0u) << i;
  EXPECT_EQ(CopyUserBytes(to, base_, sizeof(to)), sizeof(to));
}

}  // namespace
}  // namespace vsocket
