// exhausted_resources: a resource vsocket needs for shared memory is gone,
// and the connection must still work -- on TCP with a named reason, or on
// shared memory if it can do without -- never a failed call where kernel
// TCP would succeed.  Every case runs a real pair of vsocket_testpeer
// processes moving 4 MiB each way-checked by SHA-256, and the same pair with
// --plain (kernel TCP, no vsocket) as the reference.
//
//  - /dev/shm full: a 64 KiB tmpfs over /dev/shm in a private mount
//    namespace of this test process (needs root or CAP_SYS_ADMIN; skipped
//    with a message otherwise).  Its children share the namespace.
//  - Address space: RLIMIT_AS so low that the 128 MiB segment of
//    VSOCKET_RING_SIZE=64M cannot be mapped, on the client (the offer) or on
//    the server (the claim); vsocket_limit_launcher sets it.
//  - memfd_create denied (seccomp, vsocket_limit_launcher --deny-memfd):
//    a connection between processes of one user keeps its SideState in
//    the segment and needs no memfd, so shared memory still works.
//  - Every local port of the range in TIME_WAIT: a client offer needs its
//    port before the SYN and a bind cannot reuse a TIME_WAIT port, which
//    connect() can; the connection keeps TCP (local_ports_busy).  In a
//    network namespace of a forked child with an 8-port range.
// A low RLIMIT_NOFILE is covered by tests/preload/fd_limit_test.cc; a low
// RLIMIT_MEMLOCK for RDMA needs the RDMA guest (tests/rdma/).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "byte_stream.h"
#include "peer_harness.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"

#ifndef VSOCKET_LIMIT_LAUNCHER_PATH
#error "VSOCKET_LIMIT_LAUNCHER_PATH must name vsocket_limit_launcher"
#endif
#ifndef VSOCKET_TESTPEER_PATH
#error "VSOCKET_TESTPEER_PATH must name vsocket_testpeer"
#endif
#ifndef VSOCKET_SANITIZER_BUILD
#define VSOCKET_SANITIZER_BUILD 0
#endif

namespace vsocket_test {
namespace {

#ifdef VSOCKET_EXHAUSTED_RDMA
// The guest's rxe address; "" outside the RDMA guest.
std::string Host() { return RdmaGuestIp(); }
Env FastEnv() { return {{"VSOCKET_TRANSPORT", "rdma"}}; }
#else
std::string Host() { return "127.0.0.1"; }
Env FastEnv() { return Auto(); }
#endif

constexpr uint64_t kBytes = 4 << 20;
constexpr uint64_t kSeed = 0x5eed, kReplySeed = 0x4e91;

// How one end is started: launcher options (empty: no launcher), --plain.
struct End {
  std::vector<std::string> launcher;
  bool plain = false;
  Env env = FastEnv();
};

std::unique_ptr<Child> Spawn(const End& end, const std::vector<std::string>& role_and_mode,
                             std::string* error) {
  std::vector<std::string> argv;
  if (!end.launcher.empty()) {
    argv.push_back(VSOCKET_LIMIT_LAUNCHER_PATH);
    argv.insert(argv.end(), end.launcher.begin(), end.launcher.end());
    argv.push_back("--");
  }
  argv.push_back(VSOCKET_TESTPEER_PATH);
  if (end.plain) argv.push_back("--plain");
  argv.insert(argv.end(), role_and_mode.begin(), role_and_mode.end());
  return Child::Spawn({argv, end.env, {}}, error);
}

struct Outcome {
  PeerResult server, client;
};

// Client sends kBytes of kSeed, the server sinks them and replies kBytes of
// kReplySeed; both checked.
Outcome RunEnds(const End& server, const End& client) {
  Outcome o;
  std::string error;
  std::unique_ptr<Child> s = Spawn(
      server,
      {"server", "--host", Host(), "--port", "0", "sink", "--reply-bytes", std::to_string(kBytes),
       "--reply-seed", std::to_string(kReplySeed)},
      &error);
  EXPECT_TRUE(s) << error;
  if (!s) return o;
  auto port_line = s->WaitForLine("port", 10s);
  EXPECT_TRUE(port_line) << Finish(*s, 0ms).Describe();
  if (!port_line) return o;
  const std::string port = std::to_string(ParseRecords(*port_line).at(0).Int("port"));
  std::unique_ptr<Child> c = Spawn(
      client,
      {"client", "--host", Host(), "--port", port, "source", std::to_string(kBytes),
       std::to_string(kSeed)},
      &error);
  EXPECT_TRUE(c) << error;
  if (!c) return o;
  o.client = Finish(*c, 30s);
  o.server = Finish(*s, 10s);
  EXPECT_TRUE(o.client.ok()) << o.client.Describe();
  EXPECT_TRUE(o.server.ok()) << o.server.Describe();
  EXPECT_TRUE(DataIntact(o.client, o.server, kBytes, StreamSha256Hex(kSeed, kBytes)));
  EXPECT_TRUE(DataIntact(o.server, o.client, kBytes, StreamSha256Hex(kReplySeed, kBytes)));
  return o;
}

// The same programs with --plain: what the kernel alone does here.
void ExpectKernelReferenceWorks(End server, End client) {
  SCOPED_TRACE("kernel TCP reference (--plain)");
  server.plain = client.plain = true;
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.client, "plain", "")) << o.client.Describe();
}

class ExhaustedResources : public testing::Test {};

#ifdef VSOCKET_EXHAUSTED_RDMA
// RLIMIT_MEMLOCK too low to register a connection's rings (and CAP_IPC_LOCK
// dropped, or root would not be bound by it).
std::vector<std::string> LowMemlock() { return {"--memlock", std::to_string(64 << 10)}; }

TEST_F(ExhaustedResources, RdmaClientUnderLowMemlockFallsBackToTcp) {
  if (Host().empty()) GTEST_SKIP() << "VSOCKET_RDMA_SELF_IP is not set (not in the RDMA guest)";
  End server, client{.launcher = LowMemlock()};
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.client, "tcp", "rdma_memory_limit")) << o.client.Describe();
  // The client said why in its decline (rdma_backend/wire_format.h).
  EXPECT_TRUE(TookPath(o.server, "tcp", "peer_rdma_memory_limit")) << o.server.Describe();
}

TEST_F(ExhaustedResources, RdmaServerUnderLowMemlockFallsBackToTcp) {
  if (Host().empty()) GTEST_SKIP() << "VSOCKET_RDMA_SELF_IP is not set (not in the RDMA guest)";
  End server{.launcher = LowMemlock()}, client;
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.server, "tcp", "rdma_memory_limit")) << o.server.Describe();
  // The server's rejection carried its decline (rdma_backend/wire_format.h).
  EXPECT_TRUE(TookPath(o.client, "tcp", "peer_rdma_memory_limit")) << o.client.Describe();
}
#else

// In a fresh mount namespace: stops our mounts from reaching the parent's.
// "/" first; inside a chroot whose root is no mount point (CI's fresh
// Debian root) that is EINVAL, and /dev/shm, which the tests mount over,
// is enough.
bool MakeMountsPrivate() {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) return true;
  return errno == EINVAL &&
         mount(nullptr, "/dev/shm", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
}

// /dev/shm with no room for a segment: the client cannot offer.
TEST_F(ExhaustedResources, DevShmFullFallsBackToTcp) {
  if (unshare(CLONE_NEWNS) != 0) {
    GTEST_SKIP() << "needs a private mount namespace (root or CAP_SYS_ADMIN): unshare: "
                 << strerror(errno);
  }
  ASSERT_TRUE(MakeMountsPrivate()) << strerror(errno);
  ASSERT_EQ(mount("vsocket-test-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=64k,mode=1777"),
            0)
      << strerror(errno);
  End server, client;
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  // The other tests of this process (a run of the binary without ctest)
  // want the real /dev/shm back.
  EXPECT_EQ(umount2("/dev/shm", MNT_DETACH), 0) << strerror(errno);
  EXPECT_TRUE(TookPath(o.client, "tcp", "shm_setup_failed")) << o.client.Describe();
  EXPECT_TRUE(TookPath(o.server, "tcp", "peer_not_vsocket")) << o.server.Describe();
}

// How a forked test child ended: exit 77 means it lacked the privilege for
// its namespace; anything but exit 0 is reported as a failure here.
enum class ChildEnd { kPassed, kFailed, kNeedsRoot };
ChildEnd WaitForChild(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return ChildEnd::kNeedsRoot;
  bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  EXPECT_TRUE(passed) << (WIFSIGNALED(status)
                              ? std::string("killed by ") + sigabbrev_np(WTERMSIG(status))
                              : "exit " + std::to_string(WEXITSTATUS(status)));
  return passed ? ChildEnd::kPassed : ChildEnd::kFailed;
}

// Brings up `lo` in a fresh network namespace.
bool LoopbackUp() {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP;
  ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  close(fd);
  return ok;
}

int LoopbackSocket(bool vsocket, uint16_t port, bool listen_too) {
  int fd = vsocket ? vsocket_socket(AF_INET, SOCK_STREAM, 0) : socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || !listen_too) return fd;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (vsocket) {
    if (vsocket_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        vsocket_listen(fd, 16) != 0)
      return -1;
  } else if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
             listen(fd, 16) != 0) {
    return -1;
  }
  return fd;
}

sockaddr_in LoopbackPort(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

TEST_F(ExhaustedResources, LocalPortsAllInTimeWaitKeepTheConnectionOnTcp) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    if (!LoopbackUp()) _exit(10);
    int range = open("/proc/sys/net/ipv4/ip_local_port_range", O_WRONLY);
    if (range < 0 || write(range, "40000 40007\n", 12) != 12) _exit(11);
    close(range);
    // Eight kernel connections whose clients close first: each of the
    // range's ports is left in TIME_WAIT.
    int filler = LoopbackSocket(false, 30000, true);
    if (filler < 0) _exit(12);
    sockaddr_in to_filler = LoopbackPort(30000);
    for (int i = 0; i < 8; ++i) {
      int c = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(c, reinterpret_cast<sockaddr*>(&to_filler), sizeof(to_filler)) != 0)
        _exit(13);
      int s = accept(filler, nullptr, nullptr);
      if (s < 0) _exit(14);
      close(c);
      char byte;
      if (read(s, &byte, 1) != 0) _exit(15);  // the client's FIN
      close(s);
    }
    // connect() reuses a loopback TIME_WAIT port once it is a second old
    // (tcp_tw_reuse = 2); a bind never does.
    sleep(1);
    usleep(200 * 1000);
    setenv("VSOCKET_TRANSPORT", "auto", 1);
    int lfd = LoopbackSocket(true, 30001, true);
    if (lfd < 0) _exit(16);
    int cfd = LoopbackSocket(true, 0, false);
    sockaddr_in to_server = LoopbackPort(30001);
    if (vsocket_connect(cfd, reinterpret_cast<sockaddr*>(&to_server), sizeof(to_server)) != 0)
      _exit(17);
    int sfd = vsocket_accept(lfd, nullptr, nullptr);
    if (sfd < 0) _exit(18);
    if (std::string(vsocket_transport_name(cfd)) != "tcp" ||
        std::string(vsocket_fallback_reason(cfd)) != "local_ports_busy") {
      std::fprintf(stderr, "client took %s (%s)\n", vsocket_transport_name(cfd),
                   vsocket_fallback_reason(cfd));
      _exit(19);
    }
    char out[64], in[64];
    for (size_t i = 0; i < sizeof(out); ++i) out[i] = static_cast<char>(i * 7);
    if (vsocket_send(cfd, out, sizeof(out), 0) != static_cast<ssize_t>(sizeof(out)) ||
        vsocket_recv(sfd, in, sizeof(in), MSG_WAITALL) != static_cast<ssize_t>(sizeof(in)) ||
        std::memcmp(in, out, sizeof(in)) != 0) {
      _exit(20);
    }
    _exit(0);
  }
  ChildEnd end = WaitForChild(pid);
  if (end == ChildEnd::kNeedsRoot) GTEST_SKIP() << "needs root";
}

// /dev/shm fills up after the connection was set up: the segment's pages
// are allocated as data passes (the file is sparse, so that memory follows
// use), and a page tmpfs cannot allocate is a SIGBUS in whoever touches it.
// The segment fault guard (fifo_bridge/segment_fault_guard.h) turns that
// into a reset of the connection.  A forked child runs it, in its own mount
// namespace.
TEST_F(ExhaustedResources, DevShmFillingUpAfterConnectResetsInsteadOfKilling) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(77);
    if (!MakeMountsPrivate() ||
        mount("vsocket-test-shm", "/dev/shm", "tmpfs", 0, "size=8m,mode=1777") != 0) {
      _exit(10);
    }
    setenv("VSOCKET_TRANSPORT", "auto", 1);
    int lfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (vsocket_bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        vsocket_listen(lfd, 4) != 0 ||
        vsocket_getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      _exit(11);
    }
    int cfd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    if (vsocket_connect(cfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) _exit(12);
    int sfd = vsocket_accept(lfd, nullptr, nullptr);
    if (sfd < 0 || std::string(vsocket_transport_name(cfd)) != "shm") _exit(13);
    // Fill /dev/shm to the last page.
    int filler = open("/dev/shm/filler", O_CREAT | O_WRONLY, 0600);
    std::vector<char> page(4096, 'x');
    while (write(filler, page.data(), page.size()) > 0) {
    }
    // The first send touches pages tmpfs cannot allocate: the guard resets
    // the connection (those bytes are lost, as with a TCP reset), and the
    // calls after it fail as on a reset TCP connection.
    std::vector<char> data(1 << 20, 'd');
    vsocket_send(cfd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ssize_t n = vsocket_send(cfd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0 || (errno != ECONNRESET && errno != EPIPE)) _exit(14);
    // The peer learns of it when the reset side closes (its rings are
    // private now): EOF or ECONNRESET within the second.
    vsocket_close(cfd);
    timeval tv{1, 0};
    vsocket_setsockopt(sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char byte;
    n = vsocket_recv(sfd, &byte, 1, 0);
    if (n > 0 || (n < 0 && errno != ECONNRESET)) _exit(15);
    _exit(0);
  }
  ChildEnd end = WaitForChild(pid);
  if (end == ChildEnd::kNeedsRoot) GTEST_SKIP() << "needs root";
}

// Address space for the program, not for a 128 MiB segment.
std::vector<std::string> LowAddressSpace() { return {"--as-extra", std::to_string(48 << 20)}; }
Env BigRings() {
  Env env = Auto();
  env["VSOCKET_RING_SIZE"] = "64M";
  return env;
}

// A sanitizer runtime reserves terabytes of address space at start: under
// RLIMIT_AS the instrumented test peer cannot even start.
#define SKIP_UNDER_SANITIZERS()                                                  \
  do {                                                                           \
    if (VSOCKET_SANITIZER_BUILD) {                                               \
      GTEST_SKIP() << "RLIMIT_AS cannot be lowered under ASan/TSan (shadow memory)"; \
    }                                                                            \
  } while (0)

TEST_F(ExhaustedResources, ClientCannotMapItsOfferFallsBackToTcp) {
  SKIP_UNDER_SANITIZERS();
  End server{.env = BigRings()}, client{.launcher = LowAddressSpace(), .env = BigRings()};
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.client, "tcp", "shm_setup_failed")) << o.client.Describe();
}

TEST_F(ExhaustedResources, ServerCannotMapTheOfferFallsBackToTcp) {
  SKIP_UNDER_SANITIZERS();
  End server{.launcher = LowAddressSpace(), .env = BigRings()}, client{.env = BigRings()};
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.server, "tcp", "shm_setup_failed")) << o.server.Describe();
  // The client learns of the decline just after its connect returned: its
  // "conn" line may still say shm; by the end of the transfer it is TCP.
  const Record done = o.client.One("done");
  EXPECT_EQ(done.Get("path"), "tcp") << o.client.Describe();
  EXPECT_EQ(done.Get("reason"), "claim_declined") << o.client.Describe();
}

TEST_F(ExhaustedResources, MemfdCreateDeniedStillUsesSharedMemory) {
  End server{.launcher = {"--deny-memfd"}}, client{.launcher = {"--deny-memfd"}};
  ExpectKernelReferenceWorks(server, client);
  Outcome o = RunEnds(server, client);
  EXPECT_TRUE(TookPath(o.client, "shm", "")) << o.client.Describe();
  EXPECT_TRUE(TookPath(o.server, "shm", "")) << o.server.Describe();
}

#endif  // VSOCKET_EXHAUSTED_RDMA

}  // namespace
}  // namespace vsocket_test
