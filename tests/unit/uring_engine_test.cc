// The io_uring engine (toe_backend/uring_engine.h) over real loopback TCP
// connections whose peer is a plain kernel socket: the read-ahead window
// delivers the exact stream, the kernel socket's readiness and FIONREAD
// stay exact, Quiesce hands every undelivered byte to another process,
// SEND_ZC sends and reports its cookie, and a process where io_uring is
// refused (seccomp) gets kernel TCP with the reason io_uring_unavailable.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "toe_backend/uring_engine.h"
#include "toe_backend/uring_ring.h"
#include "tests/unit/uring_test_pair.h"
#include "vsocket/vsocket.h"

namespace vsocket::toe {
namespace {

void SendPattern(int fd, uint64_t offset, size_t len) {
  std::vector<uint8_t> buf(len);
  for (size_t i = 0; i < len; ++i) buf[i] = PatternByte(offset + i);
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, buf.data() + done, len - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

int KernelQueued(int fd) {
  int n = -1;
  ioctl(fd, FIONREAD, &n);
  return n;
}

void WaitQueued(int fd, int bytes) {
  for (int i = 0; i < 2000 && KernelQueued(fd) < bytes; ++i) usleep(1000);
  ASSERT_EQ(KernelQueued(fd), bytes);
}

// Read-ahead needs io_uring whose MSG_DONTWAIT receives complete at once.
bool ReadAheadPossible() {
  return ProbeUring().available && ProbeUring().nowait_recv;
}

bool PollIn(int fd) {
  pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(UringEngine, SmallReadsGetTheExactStreamMostlyFromTheWindow) {
  if (!ReadAheadPossible()) GTEST_SKIP() << "no io_uring read-ahead here";
  Pair p;
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  constexpr size_t kTotal = 2 << 20;
  std::thread writer([&] {
    for (size_t off = 0; off < kTotal; off += 1000)
      SendPattern(p.peer, off, std::min<size_t>(1000, kTotal - off));
    shutdown(p.peer, SHUT_WR);
  });
  std::vector<uint8_t> buf(100);
  uint64_t got = 0;
  for (;;) {
    ssize_t n = RecvInto(engine, h, buf.data(), buf.size(), 0);
    ASSERT_GE(n, 0) << strerror(static_cast<int>(-n));
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i)
      ASSERT_EQ(buf[i], PatternByte(got + i)) << "at offset " << got + i;
    got += static_cast<uint64_t>(n);
  }
  writer.join();
  EXPECT_EQ(got, kTotal);
  // Most bytes came from windows, and an entry served many reads.
  EXPECT_GT(engine.counters().window_bytes.load(), kTotal / 2);
  EXPECT_LT(engine.counters().readahead_enters.load(), kTotal / 100 / 10);
  engine.Close(h);
}

TEST(UringEngine, KernelReadinessAndFionreadStayExact) {
  if (!ReadAheadPossible()) GTEST_SKIP() << "no io_uring read-ahead here";
  Pair p;
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  SendPattern(p.peer, 0, 10000);
  WaitQueued(p.ours, 10000);
  char buf[100];
  ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 100);  // fills: read-ahead on
  ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 100);  // recv + peek
  EXPECT_EQ(engine.counters().readahead_enters.load(), 1u);
  ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 100);  // from the window
  EXPECT_EQ(static_cast<uint8_t>(buf[0]), PatternByte(200));
  // Undelivered bytes are still the kernel's: readable, counted once.
  EXPECT_EQ(engine.ReadableBytes(h), 9700);
  EXPECT_TRUE(PollIn(p.ours));
  // A peek does not consume.
  ASSERT_EQ(RecvInto(engine, h, buf, 10, MSG_PEEK), 10);
  EXPECT_EQ(static_cast<uint8_t>(buf[0]), PatternByte(300));
  EXPECT_EQ(engine.ReadableBytes(h), 9700);
  // Used up: delivered bytes were discarded, the socket is not readable.
  for (int i = 0; i < 97; ++i) {
    ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), MSG_DONTWAIT), 100);
    ASSERT_EQ(static_cast<uint8_t>(buf[99]), PatternByte(300 + i * 100 + 99));
  }
  EXPECT_EQ(engine.ReadableBytes(h), 0);
  EXPECT_EQ(KernelQueued(p.ours), 0);
  EXPECT_FALSE(PollIn(p.ours));
  EXPECT_EQ(RecvInto(engine, h, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
  engine.Close(h);
}

TEST(UringEngine, WaitAllCrossesFromTheWindowToTheKernel) {
  if (!ReadAheadPossible()) GTEST_SKIP() << "no io_uring read-ahead here";
  Pair p;
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  SendPattern(p.peer, 0, 4000);
  WaitQueued(p.ours, 4000);
  char buf[1000];
  ASSERT_EQ(RecvInto(engine, h, buf, 1000, 0), 1000);
  ASSERT_EQ(RecvInto(engine, h, buf, 1000, 0), 1000);  // window: 2000 more
  std::thread late([&] {
    usleep(50000);
    SendPattern(p.peer, 4000, 1000);
  });
  std::vector<uint8_t> big(3000);
  ASSERT_EQ(RecvInto(engine, h, big.data(), big.size(), MSG_WAITALL), 3000);
  late.join();
  for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(big[i], PatternByte(2000 + i));
  engine.Close(h);
}

TEST(UringEngine, QuiesceLeavesEveryUndeliveredByteToAnotherProcess) {
  if (!ReadAheadPossible()) GTEST_SKIP() << "no io_uring read-ahead here";
  Pair p;
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  SendPattern(p.peer, 0, 20000);
  WaitQueued(p.ours, 20000);
  char buf[100];
  for (int i = 0; i < 5; ++i) ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 100);
  ASSERT_GT(engine.counters().window_bytes.load(), 0u);
  engine.Quiesce(h);  // what the transport does before fork
  EXPECT_EQ(KernelQueued(p.ours), 19500);
  shutdown(p.peer, SHUT_WR);
  pid_t child = fork();
  if (child == 0) {
    // The child reads the socket itself: exactly bytes 500.. to the end.
    uint64_t off = 500;
    for (;;) {
      ssize_t n = recv(p.ours, buf, sizeof(buf), 0);
      if (n < 0) _exit(2);
      if (n == 0) break;
      for (ssize_t i = 0; i < n; ++i)
        if (static_cast<uint8_t>(buf[i]) != PatternByte(off + i)) _exit(3);
      off += static_cast<uint64_t>(n);
    }
    _exit(off == 20000 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  engine.Close(h);
}

TEST(UringEngine, NoReadAheadOnDescriptorsAnExecWouldInherit) {
  if (!ProbeUring().available) GTEST_SKIP() << "io_uring unavailable here";
  Pair p;
  ASSERT_EQ(fcntl(p.ours, F_SETFD, 0), 0);
  UringEngine engine(64 * 1024, 0);
  ToeHandle h = engine.Adopt(p.ours);
  SendPattern(p.peer, 0, 10000);
  WaitQueued(p.ours, 10000);
  char buf[100];
  for (int i = 0; i < 10; ++i) ASSERT_EQ(RecvInto(engine, h, buf, sizeof(buf), 0), 100);
  EXPECT_EQ(engine.counters().readahead_enters.load(), 0u);
  EXPECT_EQ(KernelQueued(p.ours), 9000);
  engine.Close(h);
}

TEST(UringEngine, SendZeroCopySendsAndReportsItsCookie) {
  if (!ProbeUring().available || !ProbeUring().send_zc)
    GTEST_SKIP() << "no IORING_OP_SEND_ZC here";
  Pair p;
  UringEngine engine(64 * 1024, 1);
  ToeHandle h = engine.Adopt(p.ours);
  std::vector<uint8_t> data(32 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = PatternByte(i);
  ssize_t n = engine.SendZeroCopy(h, data.data(), data.size(), 0, 42);
  ASSERT_GT(n, 0);
  uint64_t cookie = 0;
  ASSERT_EQ(engine.TakeSendDone(&cookie, 1), 1);
  EXPECT_EQ(cookie, 42u);
  std::vector<uint8_t> in(static_cast<size_t>(n));
  ASSERT_EQ(recv(p.peer, in.data(), in.size(), MSG_WAITALL), n);
  EXPECT_EQ(memcmp(in.data(), data.data(), in.size()), 0);
  engine.Close(h);
}

// ---- io_uring refused: kernel TCP with a named reason ----------------------

// Makes io_uring_setup fail with EPERM in this process and its images, as
// a container's seccomp profile does.
bool RefuseIoUring() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])),
                     filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(UringEngine, RefusedIoUringMeansKernelTcpWithItsReason) {
  pid_t child = fork();
  if (child == 0) {
    if (!RefuseIoUring()) _exit(10);
    setenv("VSOCKET_TRANSPORT", "toe", 1);
    setenv("TOE_TEST_REFUSED_CHILD", "1", 1);
    char self[] = "/proc/self/exe";
    char filter[] = "--gtest_filter=UringEngineRefused.*";
    char* argv[] = {self, filter, nullptr};
    execv(self, argv);
    _exit(11);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Runs only in the image RefusedIoUringMeansKernelTcpWithItsReason starts.
TEST(UringEngineRefused, ConnectStaysOnKernelTcp) {
  if (!getenv("TOE_TEST_REFUSED_CHILD")) GTEST_SKIP() << "runs in its parent's child";
  EXPECT_FALSE(ProbeUring().available);
  EXPECT_EQ(ProbeUring().error, EPERM);
  VsocketPair c;  // the peer a plain TCP program
  ASSERT_GE(c.fd, 0);
  EXPECT_STREQ(vsocket_transport_name(c.fd), "tcp");
  EXPECT_STREQ(vsocket_fallback_reason(c.fd), "io_uring_unavailable");
  ASSERT_EQ(vsocket_send(c.fd, "hello", 5, 0), 5);
  char buf[8] = {};
  ASSERT_EQ(recv(c.peer, buf, 5, MSG_WAITALL), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
}

}  // namespace
}  // namespace vsocket::toe
