// pid_namespace: two ends on one network namespace but in different PID
// namespaces (containers on the host network, Kubernetes hostNetwork; the CI
// root made with unshare --pid).  Each side would read the other's pids as
// numbers of its own processes, so shared memory is declined, the
// connection works on kernel TCP, and the side that finds out names the
// reason pid_namespace:
//  - a client below the listener's namespace cannot see the listener's pid
//    (SO_PEERCRED gives 0) and never offers;
//  - a listener below the client's namespace sees the client's PID namespace
//    in the offer's header and declines it at once.
// Each case is checked against the same peers on one namespace (shm).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr int kRoundTrips = 200;

PeerSpec Peer(bool own_namespace, std::vector<std::string> args) {
  PeerSpec spec{.args = {}, .env = WithStats(Auto())};
  if (own_namespace) spec.args.push_back("--new-pid-namespace");
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  return spec;
}

PairResult EchoRoundTrips(bool server_apart, bool client_apart) {
  return RunPair(Peer(server_apart, {"echo"}),
                 Peer(client_apart, {"roundtrip", std::to_string(kRoundTrips), "7"}),
                 20s);
}

void ExpectRoundTripsIntact(const PairResult& r) {
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.client.ok()) << r.client.Describe();
  ASSERT_TRUE(r.server.ok()) << r.server.Describe();
  EXPECT_EQ(r.client.One("roundtrip").Int("count"), kRoundTrips);
  EXPECT_EQ(r.client.One("roundtrip").Int("mismatches"), 0);
  EXPECT_EQ(r.server.One("echoed").Int("bytes"), r.client.One("roundtrip").Int("bytes"));
}

class PidNamespace : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  }
};

TEST_F(PidNamespace, OneNamespaceIsTheControlAndTakesShm) {
  PairResult r = EchoRoundTrips(false, false);
  ExpectRoundTripsIntact(r);
  EXPECT_TRUE(TookPath(r.client, "shm", ""));
  EXPECT_TRUE(TookPath(r.server, "shm", ""));
}

TEST_F(PidNamespace, ClientInANamespaceBelowTheListenersNeverOffers) {
  PairResult r = EchoRoundTrips(false, true);
  ExpectRoundTripsIntact(r);
  EXPECT_EQ(r.client.One("conn").Int("pid"), 1) << r.client.Describe();
  EXPECT_TRUE(TookPath(r.client, "tcp", "pid_namespace"));
  // No offer came: to the server this is a plain TCP client.
  EXPECT_TRUE(TookPath(r.server, "tcp", "peer_not_vsocket"));
}

TEST_F(PidNamespace, ListenerInANamespaceBelowTheClientsDeclinesTheOffer) {
  PairResult r = EchoRoundTrips(true, false);
  ExpectRoundTripsIntact(r);
  EXPECT_EQ(r.server.One("conn").Int("pid"), 1) << r.server.Describe();
  EXPECT_TRUE(TookPath(r.server, "tcp", "pid_namespace"));
  // The client offered and wrote ahead into the ring; the decline moved
  // what it wrote to TCP.
  EXPECT_EQ(r.client.One("done").Get("path"), "tcp") << r.client.Describe();
  EXPECT_EQ(r.client.One("done").Get("reason"), "claim_declined") << r.client.Describe();
}

TEST_F(PidNamespace, TwoSiblingNamespacesNeverOffer) {
  PairResult r = EchoRoundTrips(true, true);
  ExpectRoundTripsIntact(r);
  EXPECT_TRUE(TookPath(r.client, "tcp", "pid_namespace"));
  EXPECT_TRUE(TookPath(r.server, "tcp", "peer_not_vsocket"));
}

}  // namespace
}  // namespace vsocket_test
