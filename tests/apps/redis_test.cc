// redis: a preloaded redis-server; redis-cli writes several keys in one
// connection and reads them back in another, then redis-benchmark runs SET
// and GET.  The clients are preloaded too (shared memory) or plain (the
// server falls back to kernel TCP).  redis-server exits normally on SIGTERM,
// so its stats line is checked as well.
#include <algorithm>

#include "app_test.h"

namespace vsocket_preload_test {
namespace {

constexpr int kKeys = 8;

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string Value(int i) { return Hex(PatternBytes(64 + 37 * i, 1000 + i)); }

// The rate of redis-benchmark -q's final "<test>: N requests per second"
// line, or -1.
double RequestsPerSecond(std::string out, const std::string& test) {
  std::replace(out.begin(), out.end(), '\r', '\n');
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(test + ": ", 0) == 0 &&
        line.find(" requests per second") != std::string::npos) {
      return NumberAfterText(line, test + ":");
    }
  }
  return -1;
}

struct RedisOutcome {
  Result server, set, get, bench;
};

RedisOutcome RunRedis(bool clients_preloaded) {
  RedisOutcome o;
  auto server = Server::Start(
      [](int port) {
        return std::vector<std::string>{"redis-server", "--save", "",
                                        "--appendonly", "no", "--port",
                                        std::to_string(port), "--bind", "127.0.0.1"};
      },
      Preloaded(true));
  EXPECT_TRUE(server) << "redis-server never listened";
  if (!server) return o;
  std::string port = std::to_string(server->port());
  std::string dir = TempDir();
  std::string sets, gets;
  for (int i = 0; i < kKeys; ++i) {
    sets += "SET vsocket:key:" + std::to_string(i) + " " + Value(i) + "\n";
    gets += "GET vsocket:key:" + std::to_string(i) + "\n";
  }
  WriteFile(dir + "/set.txt", sets);
  WriteFile(dir + "/get.txt", gets);
  Options client = Preloaded(clients_preloaded);
  client.stdin_path = dir + "/set.txt";
  o.set = Run({"redis-cli", "-h", "127.0.0.1", "-p", port}, client, Ms(20000));
  client.stdin_path = dir + "/get.txt";
  o.get = Run({"redis-cli", "-h", "127.0.0.1", "-p", port}, client, Ms(20000));
  o.bench = Run({"redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "set,get",
                 "-n", "2000", "-q"},
                Preloaded(clients_preloaded), Ms(30000));
  o.server = server->Stop(SIGTERM);
  EXPECT_RUN_OK(o.set);
  EXPECT_RUN_OK(o.get);
  EXPECT_RUN_OK(o.bench);
  EXPECT_RUN_OK(o.server);
  return o;
}

void ExpectData(const RedisOutcome& o) {
  std::string ok;
  for (int i = 0; i < kKeys; ++i) ok += "OK\n";
  EXPECT_EQ(o.set.out, ok);
  std::string values;
  for (int i = 0; i < kKeys; ++i) values += Value(i) + "\n";
  EXPECT_EQ(o.get.out, values);
  // -q prints "SET: 12345.67 requests per second, ..." (after \r progress
  // lines "SET: rps=...").
  EXPECT_GT(RequestsPerSecond(o.bench.out, "SET"), 0) << o.bench.out;
  EXPECT_GT(RequestsPerSecond(o.bench.out, "GET"), 0) << o.bench.out;
}

TEST(Redis, BothEndsPreloadedUseSharedMemory) {
  VSA_REQUIRE_PROGRAMS("redis-server", "redis-cli", "redis-benchmark");
  RedisOutcome o = RunRedis(true);
  ExpectData(o);
  ExpectShmPath(o.set, 1);
  ExpectShmPath(o.get, 1);
  // 2 redis-cli connections and redis-benchmark's (50 clients by default).
  ExpectShmPath(o.server, 3);
}

TEST(Redis, OnlyServerPreloadedFallsBackToTcp) {
  VSA_REQUIRE_PROGRAMS("redis-server", "redis-cli", "redis-benchmark");
  RedisOutcome o = RunRedis(false);
  ExpectData(o);
  ExpectTcpFallbackPath(o.server, 3);
  EXPECT_EQ(ParseStats(o.set.err).lines, 0) << o.set.err;
}

}  // namespace
}  // namespace vsocket_preload_test
