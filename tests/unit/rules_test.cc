// The rules file parser and matcher (vsocket/rules.h): good files, every
// kind of malformed line with its line number, and first-match order.
#include "vsocket/rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

namespace vsocket {
namespace {

struct sockaddr_in6 V6(const char* text, uint16_t port) {
  struct sockaddr_in6 a = {};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, text, &a.sin6_addr), 1);
  return a;
}

struct sockaddr_in V4(const char* text, uint16_t port) {
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, text, &a.sin_addr), 1);
  return a;
}

const sockaddr* Sa(const void* p) { return static_cast<const sockaddr*>(p); }

Rules MustParse(const std::string& text) {
  Rules rules;
  std::string error;
  EXPECT_TRUE(ParseRules(text, "t.conf", &rules, &error)) << error;
  return rules;
}

std::string ErrorOf(const std::string& text) {
  Rules rules;
  rules.rules.resize(3);
  std::string error;
  EXPECT_FALSE(ParseRules(text, "/etc/vsocket.conf", &rules, &error));
  EXPECT_TRUE(rules.rules.empty());
  EXPECT_TRUE(rules.file.empty());
  return error;
}

TEST(Rules, ParsesEveryField) {
  Rules r = MustParse(
      "# comment line\n"
      "\n"
      "tcp client * *:* 10.0.0.5:6379   # trailing comment\n"
      "  shm\tserver redis-server *:6379 * ring=4M\r\n"
      "rdma * mem* [::1]:* [fe80::1]:80\n"
      "auto * * * *\n");
  EXPECT_EQ(r.file, "t.conf");
  ASSERT_EQ(r.rules.size(), 4u);
  const Rule& a = r.rules[0];
  EXPECT_EQ(a.line, 3u);
  EXPECT_EQ(a.policy, TransportPolicy::kTcp);
  EXPECT_EQ(a.role, RuleRole::kClient);
  EXPECT_TRUE(a.local.any_address && a.local.any_port);
  EXPECT_FALSE(a.remote.any_address);
  EXPECT_EQ(a.remote.family, AF_INET);
  EXPECT_EQ(a.remote.port, 6379);
  const Rule& b = r.rules[1];
  EXPECT_EQ(b.line, 4u);
  EXPECT_EQ(b.policy, TransportPolicy::kNamed);
  EXPECT_EQ(b.transport, "shm");
  EXPECT_EQ(b.role, RuleRole::kServer);
  EXPECT_EQ(b.program, "redis-server");
  EXPECT_EQ(b.ring_bytes, 4u << 20);
  EXPECT_TRUE(b.local.any_address);
  EXPECT_EQ(b.local.port, 6379);
  const Rule& c = r.rules[2];
  EXPECT_EQ(c.transport, "rdma");
  EXPECT_EQ(c.local.family, AF_INET6);
  EXPECT_TRUE(c.local.any_port);
  EXPECT_EQ(c.remote.port, 80);
  EXPECT_EQ(r.rules[3].policy, TransportPolicy::kAuto);
  EXPECT_EQ(r.rules[3].line, 6u);
}

TEST(Rules, EmptyAndCommentOnlyFilesHaveNoRules) {
  EXPECT_TRUE(MustParse("").rules.empty());
  EXPECT_TRUE(MustParse("# nothing\n   \n\t# here\n").rules.empty());
}

TEST(Rules, MalformedLinesNameFileLineAndProblem) {
  EXPECT_EQ(ErrorOf("tcp client *\n"),
            "/etc/vsocket.conf:1: expected POLICY ROLE PROGRAM LOCAL REMOTE "
            "[ring=SIZE], found 3 fields");
  EXPECT_EQ(ErrorOf("# ok\nauto * * * *\nTCP * * * *\n"),
            "/etc/vsocket.conf:3: unknown policy 'TCP' (expected auto, tcp or a "
            "transport's name)");
  EXPECT_EQ(ErrorOf("\n\ntcp both * * *\n"),
            "/etc/vsocket.conf:3: unknown role 'both' (expected client, server or *)");
  EXPECT_EQ(ErrorOf("tcp * * 10.0.0.1 *\n"),
            "/etc/vsocket.conf:1: bad local address '10.0.0.1' (expected ADDR:PORT, "
            "[IPV6]:PORT or *)");
  EXPECT_EQ(ErrorOf("tcp * * * *:0\n"),
            "/etc/vsocket.conf:1: bad remote address '*:0' (expected ADDR:PORT, "
            "[IPV6]:PORT or *)");
  EXPECT_EQ(ErrorOf("tcp * * * 1.2.3.4:65536\n"),
            "/etc/vsocket.conf:1: bad remote address '1.2.3.4:65536' (expected "
            "ADDR:PORT, [IPV6]:PORT or *)");
  EXPECT_EQ(ErrorOf("tcp * * ::1:80 *\n"),
            "/etc/vsocket.conf:1: bad local address '::1:80' (expected ADDR:PORT, "
            "[IPV6]:PORT or *)");
  EXPECT_EQ(ErrorOf("shm * * * * ring=3000\n"),
            "/etc/vsocket.conf:1: bad ring size '3000' (expected a power of two from "
            "4K to 1G)");
  EXPECT_EQ(ErrorOf("shm * * * * size=4K\n"),
            "/etc/vsocket.conf:1: unknown option 'size=4K' (expected ring=SIZE)");
  EXPECT_EQ(ErrorOf("shm * * * * ring=4K extra\n"),
            "/etc/vsocket.conf:1: expected POLICY ROLE PROGRAM LOCAL REMOTE "
            "[ring=SIZE], found 7 fields");
  EXPECT_EQ(ErrorOf("auto * * * *\n" + std::string(1100, 'x') + "\n"),
            "/etc/vsocket.conf:2: line longer than 1024 bytes");
  EXPECT_EQ(ErrorOf(std::string("auto * * * *\nauto\0 * * * *\n", 27)),
            "/etc/vsocket.conf:2: NUL byte in the line");
}

TEST(Rules, FirstMatchWins) {
  Rules r = MustParse(
      "tcp client * * *:7001\n"
      "shm * redis-* * *\n"
      "rdma server * *:7002 *\n"
      "auto * * * *\n");
  auto local = V4("127.0.0.1", 40000);
  auto to7001 = V4("127.0.0.1", 7001);
  auto to7003 = V4("127.0.0.1", 7003);
  const Rule* m = MatchRule(r, RuleRole::kClient, "redis-benchmark", Sa(&local), Sa(&to7001));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 1u);
  m = MatchRule(r, RuleRole::kClient, "redis-benchmark", Sa(&local), Sa(&to7003));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 2u);
  m = MatchRule(r, RuleRole::kClient, "curl", Sa(&local), Sa(&to7003));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 4u);
  // A listener: its bound address; the remote is unknown.
  auto bound = V4("0.0.0.0", 7002);
  m = MatchRule(r, RuleRole::kServer, "nginx", Sa(&bound), nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 3u);
}

TEST(Rules, UnknownAddressesMatchOnlyStar) {
  Rules r = MustParse("tcp * * * 10.0.0.1:*\n");
  EXPECT_EQ(MatchRule(r, RuleRole::kServer, "x", nullptr, nullptr), nullptr);
  auto peer = V4("10.0.0.1", 5);
  EXPECT_NE(MatchRule(r, RuleRole::kClient, "x", nullptr, Sa(&peer)), nullptr);
}

TEST(Rules, Ipv4MappedAddressesMatchIpv4Patterns) {
  Rules r = MustParse("tcp * * * 127.0.0.1:80\nshm * * * [::1]:80\n");
  auto mapped = V6("::ffff:127.0.0.1", 80);
  const Rule* m = MatchRule(r, RuleRole::kClient, "x", nullptr, Sa(&mapped));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 1u);
  auto loop6 = V6("::1", 80);
  m = MatchRule(r, RuleRole::kClient, "x", nullptr, Sa(&loop6));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->line, 2u);
  auto other = V6("::1", 81);
  EXPECT_EQ(MatchRule(r, RuleRole::kClient, "x", nullptr, Sa(&other)), nullptr);
}

TEST(Rules, ProgramIsAGlob) {
  Rules r = MustParse("tcp * redis-[sb]* * *\n");
  EXPECT_NE(MatchRule(r, RuleRole::kAny, "redis-server", nullptr, nullptr), nullptr);
  EXPECT_NE(MatchRule(r, RuleRole::kAny, "redis-benchmark", nullptr, nullptr), nullptr);
  EXPECT_EQ(MatchRule(r, RuleRole::kAny, "redis-cli", nullptr, nullptr), nullptr);
}

}  // namespace
}  // namespace vsocket
