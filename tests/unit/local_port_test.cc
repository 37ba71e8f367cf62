// The client's port before its SYN (vsocket/local_port.h): parsing the
// kernel's range files, and binding a port inside the range.
#include "vsocket/local_port.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>

namespace vsocket {
namespace {

TEST(LocalPort, ParsesTheRangeFile) {
  PortSpan range;
  ASSERT_TRUE(ParseLocalPortRange("32768\t60999\n", &range));
  EXPECT_EQ(range, PortSpan(32768, 60999));
  ASSERT_TRUE(ParseLocalPortRange("  1024 1024", &range));
  EXPECT_EQ(range, PortSpan(1024, 1024));
  EXPECT_FALSE(ParseLocalPortRange("", &range));
  EXPECT_FALSE(ParseLocalPortRange("60999 32768\n", &range));  // inverted
  EXPECT_FALSE(ParseLocalPortRange("0 100\n", &range));
  EXPECT_FALSE(ParseLocalPortRange("32768 70000\n", &range));
  EXPECT_FALSE(ParseLocalPortRange("32768 60999 1\n", &range));
  EXPECT_FALSE(ParseLocalPortRange("a b\n", &range));
}

TEST(LocalPort, ParsesTheReservedPortsFile) {
  std::vector<PortSpan> spans;
  ASSERT_TRUE(ParseReservedPorts("\n", &spans));
  EXPECT_TRUE(spans.empty());
  ASSERT_TRUE(ParseReservedPorts("8080,9000-9010\n", &spans));
  EXPECT_EQ(spans, (std::vector<PortSpan>{{8080, 8080}, {9000, 9010}}));
  EXPECT_FALSE(ParseReservedPorts("9010-9000\n", &spans));
  EXPECT_FALSE(ParseReservedPorts("80;81\n", &spans));
  EXPECT_FALSE(ParseReservedPorts("80-\n", &spans));
}

uint16_t BoundPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  return ntohs(a.sin_port);
}

// Distinct ports inside the namespace's range, each one the socket's.
TEST(LocalPort, BindsDistinctPortsOfTheRange) {
  PortSpan range{32768, 60999};
  char text[64] = {};
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    ASSERT_TRUE(ParseLocalPortRange(std::string_view(text, n), &range));
  }
  std::set<uint16_t> seen;
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    uint16_t port = EnsureLocalPort(fd, AF_INET);
    ASSERT_NE(port, 0);
    EXPECT_EQ(BoundPort(fd), port);
    EXPECT_GE(port, range.first);
    EXPECT_LE(port, range.second);
    EXPECT_TRUE(seen.insert(port).second) << port;
    EXPECT_EQ(EnsureLocalPort(fd, AF_INET), port);  // already bound: kept
    fds.push_back(fd);
  }
  for (int fd : fds) close(fd);
}

// A port whose provider name is still held is skipped (the shared-memory
// name of a reset connection whose server has not closed yet).
TEST(LocalPort, SkipsPortsWhoseNamesAreHeld) {
  struct Asked {
    int calls = 0;
  } asked;
  PortNames names{[](uint16_t port, const void* context) {
                    ++const_cast<Asked*>(static_cast<const Asked*>(context))->calls;
                    return port % 3 == 0;
                  },
                  &asked};
  std::vector<int> fds;
  for (int i = 0; i < 50; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    uint16_t port = EnsureLocalPort(fd, AF_INET, &names);
    ASSERT_NE(port, 0);
    EXPECT_NE(port % 3, 0) << port;
    EXPECT_EQ(BoundPort(fd), port);
    fds.push_back(fd);
  }
  EXPECT_GE(asked.calls, 50);
  for (int fd : fds) close(fd);
}

// A socket the application marked SO_REUSEADDR gets the kernel's choice,
// which never shares a port another socket uses.
TEST(LocalPort, ReuseAddressSocketsGetTheKernelsChoice) {
  int other = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_NE(EnsureLocalPort(other, AF_INET), 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int on = 1;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
  uint16_t port = EnsureLocalPort(fd, AF_INET);
  ASSERT_NE(port, 0);
  EXPECT_NE(port, BoundPort(other));
  close(fd);
  close(other);
}

// Ports the random tries miss are still found: a range of 512 with all but
// two bound (as ten thousand connections bind most of bind()'s half of the
// usual range), the two are found one after the other, then none.  32
// random tries alone find both in about 2 runs of 100.  In a forked child's
// network namespace, whose range it sets (needs root).
TEST(LocalPort, TheLastFreePortsOfANearlyFullRangeAreFound) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    int range = open("/proc/sys/net/ipv4/ip_local_port_range", O_WRONLY);
    if (range < 0 || write(range, "40000 40511\n", 12) != 12) _exit(10);
    close(range);
    const uint16_t free_ports[] = {40123, 40400};
    for (uint16_t port = 40000; port <= 40511; ++port) {
      if (port == free_ports[0] || port == free_ports[1]) continue;
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) _exit(11);
    }
    // The range is read at most once a second: one the parent read in this
    // second would still be used.
    usleep(1100 * 1000);
    std::set<uint16_t> found;
    for (int i = 0; i < 2; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      uint16_t port = EnsureLocalPort(fd, AF_INET);
      if (port == 0) _exit(12);
      if (BoundPort(fd) != port) _exit(13);
      found.insert(port);
    }
    if (found != std::set<uint16_t>(std::begin(free_ports), std::end(free_ports))) _exit(14);
    int full = socket(AF_INET, SOCK_STREAM, 0);
    if (EnsureLocalPort(full, AF_INET) != 0 || BoundPort(full) != 0) _exit(15);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no network namespace (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "12: a free port was not found; 14: other ports; "
                                       "15: a port in a full range";
}

}  // namespace
}  // namespace vsocket
