// The prediction behind reason short_lived (vsocket/connection_history.h).
#include "vsocket/connection_history.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace vsocket {
namespace {

DestinationKey V4(const char* ip, uint16_t port) {
  struct sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sin.sin_addr);
  DestinationKey key;
  EXPECT_TRUE(MakeDestinationKey(reinterpret_cast<struct sockaddr*>(&sin),
                                 sizeof(sin), &key));
  return key;
}

TEST(ConnectionHistory, PredictsShortAfterTheStreakOnly) {
  ConnectionHistory h(16, 4, 100);
  DestinationKey a = V4("127.0.0.1", 80);
  for (int i = 0; i < 3; ++i) {
    h.Record(a, 2);
    EXPECT_FALSE(h.PredictsShort(a)) << i;
  }
  h.Record(a, 15);  // the fourth short one
  EXPECT_TRUE(h.PredictsShort(a));
}

TEST(ConnectionHistory, OneBusyConnectionEndsThePrediction) {
  ConnectionHistory h(16, 4, 100);
  DestinationKey a = V4("127.0.0.1", 80);
  for (int i = 0; i < 10; ++i) h.Record(a, 1);
  ASSERT_TRUE(h.PredictsShort(a));
  h.Record(a, 16);
  EXPECT_FALSE(h.PredictsShort(a));
  // And the streak starts again from nothing.
  for (int i = 0; i < 3; ++i) h.Record(a, 1);
  EXPECT_FALSE(h.PredictsShort(a));
}

TEST(ConnectionHistory, DestinationsAreApart) {
  ConnectionHistory h(16, 4, 100);
  for (int i = 0; i < 4; ++i) h.Record(V4("127.0.0.1", 80), 1);
  EXPECT_TRUE(h.PredictsShort(V4("127.0.0.1", 80)));
  EXPECT_FALSE(h.PredictsShort(V4("127.0.0.1", 81)));
  EXPECT_FALSE(h.PredictsShort(V4("127.0.0.2", 80)));
}

TEST(ConnectionHistory, ZeroCallsThresholdNeverPredicts) {
  ConnectionHistory h(0, 4, 100);
  DestinationKey a = V4("127.0.0.1", 80);
  for (int i = 0; i < 10; ++i) h.Record(a, 0);
  EXPECT_FALSE(h.PredictsShort(a));
}

TEST(ConnectionHistory, TheTableIsBounded) {
  ConnectionHistory h(16, 1, 8);
  for (uint16_t port = 1; port <= 8; ++port) h.Record(V4("10.0.0.1", port), 1);
  EXPECT_TRUE(h.PredictsShort(V4("10.0.0.1", 1)));
  h.Record(V4("10.0.0.1", 9), 1);  // a ninth destination: starts again
  EXPECT_FALSE(h.PredictsShort(V4("10.0.0.1", 1)));
  EXPECT_TRUE(h.PredictsShort(V4("10.0.0.1", 9)));
}

TEST(ConnectionHistory, KeysCoverBothFamiliesAndNothingElse) {
  struct sockaddr_in6 sin6 = {};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(80);
  sin6.sin6_addr = in6addr_loopback;
  DestinationKey v6;
  EXPECT_TRUE(MakeDestinationKey(reinterpret_cast<struct sockaddr*>(&sin6),
                                 sizeof(sin6), &v6));
  EXPECT_FALSE(v6 == V4("127.0.0.1", 80));
  struct sockaddr_in short_sin = {};
  short_sin.sin_family = AF_INET;
  DestinationKey k;
  EXPECT_FALSE(MakeDestinationKey(reinterpret_cast<struct sockaddr*>(&short_sin),
                                  sizeof(short_sin) - 1, &k));
  struct sockaddr unix_like = {};
  unix_like.sa_family = AF_UNIX;
  EXPECT_FALSE(MakeDestinationKey(&unix_like, sizeof(unix_like), &k));
  EXPECT_FALSE(MakeDestinationKey(nullptr, 0, &k));
}

}  // namespace
}  // namespace vsocket
