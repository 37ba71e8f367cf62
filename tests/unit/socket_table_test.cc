// The socket table's lock-free pins (vsocket/socket_table.h,
// vsocket/hazard_slots.h): a socket unregistered while another thread pins
// it lives until that pin ends and is then destroyed exactly once, by
// whichever side finishes last.  Run under the ASan build, a use after free
// here is a failure.
#include "vsocket/socket_table.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "vsocket/hazard_slots.h"

namespace vsocket {
namespace {

// Descriptor numbers far above anything the test process opens, so the
// table entries never describe a real descriptor.
constexpr int kBaseFd = 900000;

std::shared_ptr<VirtualSocket> NewSocket() {
  return std::make_shared<VirtualSocket>(AF_INET, false);
}

TEST(SocketTable, PinFindsWhatIsRegisteredAndNothingElse) {
  auto s = NewSocket();
  RegisterSocket(kBaseFd, s);
  {
    SocketPin pin = PinSocket(kBaseFd);
    ASSERT_TRUE(pin);
    EXPECT_EQ(pin.get(), s.get());
    EXPECT_FALSE(PinSocket(kBaseFd + 1));
    EXPECT_FALSE(PinSocket(-1));
  }
  EXPECT_EQ(UnregisterSocket(kBaseFd).get(), s.get());
  EXPECT_FALSE(PinSocket(kBaseFd));
}

TEST(SocketTable, UnregisteredWhilePinnedLivesUntilThePinEnds) {
  auto s = NewSocket();
  std::weak_ptr<VirtualSocket> watch = s;
  RegisterSocket(kBaseFd + 2, std::move(s));
  SocketPin pin = PinSocket(kBaseFd + 2);
  ASSERT_TRUE(pin);
  UnregisterSocket(kBaseFd + 2).reset();  // the close path drops its reference
  EXPECT_FALSE(watch.expired()) << "destroyed while a call was inside it";
  EXPECT_EQ(pin->domain(), AF_INET);
  pin = SocketPin();
  EXPECT_TRUE(watch.expired()) << "kept after the last pin ended";
}

TEST(SocketTable, ReplacedEntryWhilePinnedLivesUntilThePinEnds) {
  auto a = NewSocket();
  std::weak_ptr<VirtualSocket> watch = a;
  RegisterSocket(kBaseFd + 3, std::move(a));
  SocketPin pin = PinSocket(kBaseFd + 3);
  RegisterSocket(kBaseFd + 3, NewSocket());  // a stale entry replaced
  EXPECT_FALSE(watch.expired());
  pin = SocketPin();
  EXPECT_TRUE(watch.expired());
  EXPECT_TRUE(PinSocket(kBaseFd + 3));
  UnregisterSocket(kBaseFd + 3);
}

TEST(SocketTable, NestedPinsBeyondTheThreadsSlotsStillWork) {
  auto s = NewSocket();
  RegisterSocket(kBaseFd + 4, s);
  std::vector<SocketPin> pins;
  for (int i = 0; i < hazard::kSlotsPerThread + 3; ++i) {
    pins.push_back(PinSocket(kBaseFd + 4));
    ASSERT_TRUE(pins.back());
    EXPECT_EQ(pins.back().get(), s.get());
  }
  pins.clear();
  UnregisterSocket(kBaseFd + 4);
}

// Readers pin and read a field while a writer keeps registering and
// unregistering fresh sockets under the same numbers.
TEST(SocketTable, ConcurrentPinsAndClosesNeverSeeAFreedSocket) {
  constexpr int kFds = 8;
  std::atomic<bool> stop{false};
  std::atomic<long> pinned{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < kFds; ++i) {
          SocketPin pin = PinSocket(kBaseFd + 10 + i);
          if (pin) {
            EXPECT_EQ(pin->domain(), AF_INET);
            pinned.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
    });
  }
  // At least 20000 changes, and on until the readers pinned 1000 times
  // (a loaded machine may not run them during the first 20000), for 10 s
  // at most.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int round = 0;
       round < 20000 || (pinned.load(std::memory_order_relaxed) < 1000 &&
                         std::chrono::steady_clock::now() < deadline);
       ++round) {
    int fd = kBaseFd + 10 + round % kFds;
    if (round % 2 == 0) {
      RegisterSocket(fd, NewSocket());
    } else {
      UnregisterSocket(fd).reset();
    }
  }
  stop = true;
  for (auto& t : readers) t.join();
  for (int i = 0; i < kFds; ++i) UnregisterSocket(kBaseFd + 10 + i);
  EXPECT_GT(pinned.load(), 0);
}

}  // namespace
}  // namespace vsocket
