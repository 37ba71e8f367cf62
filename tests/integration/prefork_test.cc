// prefork: a server listens, then forks 4 workers that each accept in a loop
// (the classic prefork model: the accepting process is not the one that
// called listen). 16 concurrent vsocket clients; every connection, in every
// worker, takes shm and echoes correctly.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr int kWorkers = 4;
constexpr int kClients = 16;
constexpr int kRoundtrips = 20;

std::set<std::string> SplitPids(const std::string& csv) {
  std::set<std::string> out;
  std::stringstream ss(csv);
  for (std::string pid; std::getline(ss, pid, ',');) out.insert(pid);
  return out;
}

TEST(Prefork, SixteenClientsAcrossFourWorkersAllTakeShmAndEcho) {
  Started server = StartServer(
      {.args = {"--workers", std::to_string(kWorkers), "echo"}, .env = Auto()});
  ASSERT_TRUE(server.child) << server.error;
  auto workers_line = server.child->WaitForLine("workers", 10s);
  ASSERT_TRUE(workers_line.has_value()) << server.child->Stdout();
  const std::set<std::string> worker_pids =
      SplitPids(ParseRecords(*workers_line).at(0).Get("pids"));
  ASSERT_EQ(worker_pids.size(), static_cast<size_t>(kWorkers));

  std::vector<Started> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(StartClient(
        {.args = {"roundtrip", std::to_string(kRoundtrips), std::to_string(100 + i)},
         .env = Auto()},
        server.port));
    ASSERT_TRUE(clients.back().child) << clients.back().error;
  }
  int64_t client_bytes = 0;
  for (int i = 0; i < kClients; ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    PeerResult c = Finish(*clients[i].child, 30s);
    ASSERT_TRUE(c.ok()) << c.Describe();
    EXPECT_EQ(c.One("roundtrip").Int("count"), kRoundtrips);
    EXPECT_EQ(c.One("roundtrip").Int("mismatches"), 0);
    EXPECT_TRUE(TookPath(c, "shm", ""));
    client_bytes += c.One("roundtrip").Int("bytes");
  }

  // Every client has seen EOF, so every worker has reported its connection.
  server.child->Signal(SIGTERM);
  PeerResult s = Finish(*server.child, 10s);
  ASSERT_TRUE(s.ok()) << s.Describe();
  EXPECT_EQ(s.One("workers_stopped").Int("unexpected"), 0);

  ASSERT_EQ(s.All("conn").size(), static_cast<size_t>(kClients)) << s.Describe();
  EXPECT_EQ(s.All("done").size(), static_cast<size_t>(kClients)) << s.Describe();
  EXPECT_TRUE(TookPath(s, "shm", ""));
  std::map<std::string, int> per_worker;
  for (const Record& conn : s.All("conn")) {
    EXPECT_TRUE(worker_pids.count(conn.Get("pid")))
        << "connection accepted by pid " << conn.Get("pid") << ", not a worker";
    ++per_worker[conn.Get("pid")];
  }
  int64_t echoed = 0;
  for (const Record& e : s.All("echoed")) {
    EXPECT_EQ(e.Get("end"), "eof");
    echoed += e.Int("bytes");
  }
  EXPECT_EQ(echoed, client_bytes);

  std::string spread;
  for (const auto& [pid, n] : per_worker) spread += pid + ":" + std::to_string(n) + " ";
  RecordProperty("connections_per_worker", spread);
}

}  // namespace
}  // namespace vsocket_test
