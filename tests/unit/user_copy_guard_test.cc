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

  // What CopyUserBytes returns for `n` bytes when `good` lie before the
  // bad page.
  static size_t ExpectedCount(size_t good, size_t n) {
    return n <= kLandingCopyMax ? good : 0;
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

// Every way through the copy: each small size class (1-3, 4-7, 8-15,
// 16-256 bytes) with the bad page at each offset, and a large copy.
TEST_F(UserCopyGuardTest, ASourceRunningIntoABadPageStopsThere) {
  for (size_t n : {1, 3, 5, 7, 9, 15, 16, 17, 64, 100, 255, 256, 400}) {
    for (size_t good = 0; good < n; good += (n > 20 ? 7 : 1)) {
      char* src = base_ + page_ - good;
      std::memset(src, 'x', good);
      std::vector<char> to(n, 0);
      ASSERT_EQ(CopyUserBytes(to.data(), src, n), ExpectedCount(good, n))
          << n << " bytes, " << good << " good";
      if (n <= kLandingCopyMax) {
        EXPECT_EQ(std::string(to.data(), good), std::string(good, 'x'));
        EXPECT_EQ(to[good], 0) << n << " bytes, " << good << " good";
      }
    }
  }
}

TEST_F(UserCopyGuardTest, ADestinationRunningIntoABadPageStopsThere) {
  for (size_t n : {2, 4, 6, 8, 12, 16, 31, 64, 128, 256, 300}) {
    for (size_t good = 0; good < n; good += (n > 20 ? 5 : 1)) {
      char* dst = base_ + page_ - good;
      std::memset(dst, 0, good);
      std::vector<char> from(n, 'y');
      ASSERT_EQ(CopyUserBytes(dst, from.data(), n), ExpectedCount(good, n))
          << n << " bytes, " << good << " good";
      if (n <= kLandingCopyMax) {
        EXPECT_EQ(std::string(dst, good), std::string(good, 'y'));
      }
    }
  }
}

// Every size of the fast way copies every byte, and nothing past them.
TEST_F(UserCopyGuardTest, EverySmallSizeCopiesExactly) {
  std::vector<char> from(300), to(300 + 16);
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<char>(i * 7 + 1);
  for (size_t n = 0; n <= 300; ++n) {
    std::fill(to.begin(), to.end(), 0);
    ASSERT_EQ(CopyUserBytes(to.data(), from.data(), n), n);
    ASSERT_EQ(std::memcmp(to.data(), from.data(), n), 0) << n;
    for (size_t i = n; i < to.size(); ++i) ASSERT_EQ(to[i], 0) << n << " wrote " << i;
  }
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
