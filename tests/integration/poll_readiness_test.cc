// poll_readiness: libc poll() (not vsocket_poll) on a vsocket descriptor
// tells the truth. A probe process runs a fixed script against a partner,
// coordinated over a control pipe so the socket carries only test data:
//   idle        POLLIN not set while nothing was sent
//   readable    POLLIN set once the partner wrote
//   drained     POLLIN clear again after reading everything
//   writable    POLLOUT set on a fresh connection
//   fill/full   a non-blocking writer fills the path until EAGAIN; then
//               POLLOUT is clear (immediately and after 200 ms)
//   unblocked   a blocked poll(POLLOUT) wakes when the partner drains
//   wake_data   a blocked poll(POLLIN) wakes when data arrives ~300 ms later
//   wake_close  a blocked poll(POLLIN) wakes (POLLIN/POLLHUP) when the partner
//               closes ~300 ms later, and recv then returns 0
// Over shm (the point) and over kernel TCP (reference), probe on either end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include "peer_harness.h"

namespace vsocket_test {
namespace {

struct PollCase {
  const char* name;
  bool probe_is_client;
  bool shm;
};

class PollReadinessTest : public testing::TestWithParam<PollCase> {};

Record Step(const PeerResult& probe, const std::string& step) {
  for (const Record& r : probe.All("poll")) {
    if (r.Get("step") == step) return r;
  }
  return Record{.tag = "<no poll step=" + step + ">"};
}

TEST_P(PollReadinessTest, PlainPollReportsReadinessTruthfully) {
  const PollCase& c = GetParam();
  const Env env = c.shm ? Auto() : ForceTcp();
  int to_partner[2], to_probe[2];
  ASSERT_EQ(pipe2(to_partner, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(to_probe, O_CLOEXEC), 0);
  const std::vector<std::string> ctl = {"--ctl-in", "3", "--ctl-out", "4"};
  PeerSpec probe{.args = {"poll-probe"}, .env = env,
                 .inherit_fds = {{to_probe[0], 3}, {to_partner[1], 4}}};
  PeerSpec partner{.args = {"poll-partner"}, .env = env,
                   .inherit_fds = {{to_partner[0], 3}, {to_probe[1], 4}}};
  probe.args.insert(probe.args.end(), ctl.begin(), ctl.end());
  partner.args.insert(partner.args.end(), ctl.begin(), ctl.end());

  Started server = StartServer(c.probe_is_client ? partner : probe);
  Started client;
  if (server.child) client = StartClient(c.probe_is_client ? probe : partner, server.port);
  for (int fd : {to_partner[0], to_partner[1], to_probe[0], to_probe[1]}) close(fd);
  ASSERT_TRUE(server.child) << server.error;
  ASSERT_TRUE(client.child) << client.error;
  PeerResult cr = Finish(*client.child, 30s);
  PeerResult sr = Finish(*server.child, 10s);
  ASSERT_TRUE(cr.ok()) << cr.Describe();
  ASSERT_TRUE(sr.ok()) << sr.Describe();
  const PeerResult& p = c.probe_is_client ? cr : sr;
  const PeerResult& partner_out = c.probe_is_client ? sr : cr;
  SCOPED_TRACE("probe:\n" + p.Describe());

  EXPECT_TRUE(TookPath(p, c.shm ? "shm" : "tcp", c.shm ? "" : "disabled_by_config"));

  EXPECT_EQ(Step(p, "idle").Int("n"), 0);
  EXPECT_EQ(Step(p, "readable").Int("n"), 1);
  EXPECT_EQ(Step(p, "readable").Int("revents"), POLLIN);
  EXPECT_EQ(Step(p, "drained").Int("n"), 0);

  EXPECT_EQ(Step(p, "writable").Int("n"), 1);
  EXPECT_EQ(Step(p, "writable").Int("revents"), POLLOUT);
  EXPECT_EQ(p.One("fill").Get("errno"), "EAGAIN");
  EXPECT_GT(p.One("fill").Int("bytes"), 0);
  EXPECT_EQ(Step(p, "full").Int("n"), 0);
  EXPECT_EQ(Step(p, "full_wait").Int("n"), 0);
  EXPECT_EQ(partner_out.One("drained").Int("bytes"), p.One("fill").Int("bytes"));
  EXPECT_EQ(Step(p, "unblocked").Int("n"), 1);
  EXPECT_TRUE(Step(p, "unblocked").Int("revents") & POLLOUT);
  EXPECT_LT(Step(p, "unblocked").Int("ms"), 2000);

  EXPECT_EQ(Step(p, "wake_data").Int("n"), 1);
  EXPECT_EQ(Step(p, "wake_data").Int("revents"), POLLIN);
  EXPECT_GE(Step(p, "wake_data").Int("ms"), 200);  // it waited for the data
  EXPECT_LT(Step(p, "wake_data").Int("ms"), 2000);  // and woke on it

  EXPECT_EQ(Step(p, "wake_close").Int("n"), 1);
  EXPECT_TRUE(Step(p, "wake_close").Int("revents") & (POLLIN | POLLHUP));
  EXPECT_GE(Step(p, "wake_close").Int("ms"), 200);
  EXPECT_LT(Step(p, "wake_close").Int("ms"), 2000);
  EXPECT_EQ(p.One("recv").Get("ret"), "0");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PollReadinessTest,
    testing::Values(PollCase{"ProbeClientShm", true, true},
                    PollCase{"ProbeServerShm", false, true},
                    PollCase{"ProbeClientTcp", true, false},
                    PollCase{"ProbeServerTcp", false, false}),
    [](const testing::TestParamInfo<PollCase>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace vsocket_test
