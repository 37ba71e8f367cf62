// The explicit API's zero-copy calls on shared memory and kernel TCP
// (include/vsocket/vsocket.h, "Zero copy"): 64 MiB moved with
// vsocket_send_registered / vsocket_recv_inplace mixed with send/recv and
// checked byte by byte, the view and release semantics (EBUSY, partial and
// empty releases, FIONREAD, ring space given back only at the release), the
// errors (EINVAL, EBADF, ENOTSOCK, ENOTCONN, EFAULT, EAGAIN, EPIPE/SIGPIPE,
// EBUSY from deregister), end of stream and the stats.
//
// Each test forks a server and a client process that set VSOCKET_* before
// their first vsocket call (the configuration is read once per process);
// the gtest process itself never calls vsocket.  RDMA: tests/rdma/
// rdma_zerocopy_test.cc.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "child_check.h"
#include "clock.h"
#include "forked_pair.h"
#include "loopback.h"
#include "stats_json.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"
#include "zerocopy_stream.h"

namespace {

using vsocket_test::NowMs;
using vsocket_test_support::Loopback;

using vsocket_zc_test::CheckPattern;
using vsocket_zc_test::FillPattern;
using vsocket_zc_test::RecvMixed;
using vsocket_zc_test::SendMixed;

using Ctl = vsocket_test::ControlPair;

void Configure(const std::string& mode) {
  setenv("VSOCKET_TRANSPORT", mode.c_str(), 1);
  setenv("VSOCKET_RING_SIZE", "64K", 1);  // a ring the tests can fill
  setenv("VSOCKET_CLAIM_TIMEOUT_MS", "10000", 1);
}

int Listen(int* port) {
  return vsocket_test::ListenOn(vsocket_test::VsocketApi(), Loopback(0), port,
                                {.backlog = 4});
}

int Connect(int port) {
  return vsocket_test::ConnectTo(vsocket_test::VsocketApi(), Loopback(port));
}

void ExpectTransport(int fd, const std::string& mode) {
  const char* name = vsocket_transport_name(fd);
  CHECK(name && mode == name, "transport %s, want %s (%s)", name ? name : "null",
        mode.c_str(), vsocket_fallback_reason(fd));
}

int64_t StatsOf(const std::string& mode, const char* key) {
  char buf[2048];
  vsocket_stats_json(buf, sizeof(buf));
  auto json = vsocket_test::ParseJson(buf);
  CHECK(json.has_value(), "stats do not parse: %s", buf);
  return vsocket_test::StatsNumber(*json, {"transports", mode, key});
}

int Readable(int fd) {
  int n = -1;
  CHECK(vsocket_ioctl(fd, FIONREAD, &n) == 0, "FIONREAD");
  return n;
}

// Runs both ends in children joined by a control socketpair; true when
// both exited 0.  The client starts with the port the server sent first.
bool RunPair(const std::function<void(Ctl&)>& server,
             const std::function<void(Ctl&, int port)>& client) {
  vsocket_test::PairStatus st = vsocket_test::ForkPair(
      server, [&](Ctl& ctl, pid_t) { client(ctl, static_cast<int>(ctl.Recv(1))); },
      {.watchdog_s = 120});  // never hang the suite
  return st.error.empty() && st.server.ExitedZero() && st.client.ExitedZero();
}

class ZeroCopyApi : public testing::TestWithParam<std::string> {};

constexpr uint64_t kSeed = 0x2EC0;
constexpr uint64_t kStreamBytes = uint64_t{64} << 20;
constexpr size_t kRegion = 4 << 20;

TEST_P(ZeroCopyApi, SixtyFourMiBMixedArriveIntact) {
  const std::string mode = GetParam();
  bool ok = RunPair(
      [&](Ctl& ctl) {
        Configure(mode);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0, "accept");
        ExpectTransport(fd, mode);
        auto rep = RecvMixed(fd, kSeed, 0, UINT64_MAX);
        CHECK(rep.error.empty(), "%s", rep.error.c_str());
        CHECK(rep.eof && rep.bytes == kStreamBytes, "got %llu bytes",
              static_cast<unsigned long long>(rep.bytes));
        CHECK(rep.views > 100 && rep.inplace > kStreamBytes / 4,
              "in place: %llu bytes in %llu views",
              static_cast<unsigned long long>(rep.inplace),
              static_cast<unsigned long long>(rep.views));
        // End of stream stays end of stream.
        const void* view = nullptr;
        CHECK(vsocket_recv_inplace(fd, &view, 100, 0) == 0, "second EOF");
        // Released in-place bytes count as received, once.
        CHECK(StatsOf(mode, "bytes_received") == static_cast<int64_t>(kStreamBytes),
              "bytes_received %lld", static_cast<long long>(StatsOf(mode, "bytes_received")));
        printf("[server] %s: %llu bytes, %llu in place (%llu views)\n", mode.c_str(),
               static_cast<unsigned long long>(rep.bytes),
               static_cast<unsigned long long>(rep.inplace),
               static_cast<unsigned long long>(rep.views));
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl&, int port) {
        Configure(mode);
        int fd = Connect(port);
        ExpectTransport(fd, mode);
        std::vector<uint8_t> buf(kRegion);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        auto rep = SendMixed(fd, r, buf.data(), buf.size(), kSeed, 0, kStreamBytes);
        CHECK(rep.error.empty(), "%s", rep.error.c_str());
        CHECK(rep.registered > kStreamBytes / 4, "registered %llu",
              static_cast<unsigned long long>(rep.registered));
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        CHECK(StatsOf(mode, "bytes_sent") == static_cast<int64_t>(kStreamBytes),
              "bytes_sent %lld", static_cast<long long>(StatsOf(mode, "bytes_sent")));
        char c;
        CHECK(vsocket_recv(fd, &c, 1, 0) == 0, "server's EOF");
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(fd);
      });
  EXPECT_TRUE(ok);
}

// Errors that need no connection, and what a bad descriptor gets.
TEST_P(ZeroCopyApi, ArgumentAndDescriptorErrors) {
  const std::string mode = GetParam();
  bool ok = RunPair(
      [&](Ctl& ctl) {
        Configure(mode);
        ctl.Send(0, 0);
        char buf[64];
        CHECK_ERR(vsocket_register(nullptr, 10) ? 0 : -1, EINVAL);
        CHECK_ERR(vsocket_register(buf, 0) ? 0 : -1, EINVAL);
        CHECK_ERR(vsocket_register(reinterpret_cast<void*>(~uintptr_t{0} - 4), 64) ? 0 : -1,
                  EINVAL);
        CHECK_ERR(vsocket_deregister(nullptr), EINVAL);
        vsocket_region* r = vsocket_register(buf, sizeof(buf));
        CHECK(r != nullptr, "register");
        const void* view = nullptr;
        // Bad descriptors: as send/recv would say.
        CHECK_ERR(vsocket_send_registered(-1, r, 0, 1, 0), EBADF);
        CHECK_ERR(vsocket_recv_inplace(-1, &view, 1, 0), EBADF);
        CHECK_ERR(vsocket_recv_release(-1, 0), EBADF);
        int p[2];
        CHECK(pipe(p) == 0, "pipe");
        CHECK_ERR(vsocket_send_registered(p[1], r, 0, 1, 0), ENOTSOCK);
        CHECK_ERR(vsocket_recv_inplace(p[0], &view, 1, 0), ENOTSOCK);
        CHECK_ERR(vsocket_recv_release(p[0], 0), ENOTSOCK);
        // A kernel socket vsocket did not create has no in-place view.
        int k = socket(AF_INET, SOCK_STREAM, 0);
        CHECK_ERR(vsocket_recv_inplace(k, &view, 1, 0), EOPNOTSUPP);
        // A bad range on a bad descriptor: the descriptor is reported.
        CHECK_ERR(vsocket_send_registered(-1, r, 60, 5, 0), EBADF);
        // An unconnected vsocket socket: ENOTCONN, like recv.
        int u = vsocket_socket(AF_INET, SOCK_STREAM, 0);
        CHECK(u >= 0, "socket");
        CHECK_ERR(vsocket_recv_inplace(u, &view, 1, 0), ENOTCONN);
        CHECK_ERR(vsocket_recv_release(u, 0), ENOTCONN);
        CHECK_ERR(vsocket_send_registered(u, r, 0, 1, MSG_NOSIGNAL), EPIPE);
        CHECK_ERR(vsocket_send_registered(u, r, 60, 5, 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(u, nullptr, 0, 1, 0), EINVAL);
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(u);
        close(k);
      },
      [&](Ctl&, int) {});
  EXPECT_TRUE(ok);
}

// View and release semantics, timeouts, back-pressure, deregister while a
// send is blocked, end of stream, EPIPE and SIGPIPE.
TEST_P(ZeroCopyApi, ViewReleaseAndErrorSemantics) {
  const std::string mode = GetParam();
  const bool ring = mode == "shm";  // kernel TCP's buffers are too deep to fill
  bool ok = RunPair(
      [&](Ctl& ctl) {
        Configure(mode);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0, "accept");
        ExpectTransport(fd, mode);
        const void* view = nullptr;
        uint64_t off = 0;  // stream offset consumed so far

        // Nothing there yet.
        CHECK_ERR(vsocket_recv_inplace(fd, &view, 100, MSG_DONTWAIT), EAGAIN);
        CHECK_ERR(vsocket_recv_release(fd, 0), EINVAL);  // no view
        CHECK_ERR(vsocket_recv_inplace(fd, &view, 100, MSG_PEEK), EINVAL);
        CHECK_ERR(vsocket_recv_inplace(fd, nullptr, 100, 0), EFAULT);
        CHECK(vsocket_recv_inplace(fd, &view, 0, 0) == 0, "max 0");
        // SO_RCVTIMEO bounds the wait.
        struct timeval tv = {0, 100000};
        CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "timeo");
        int64_t t0 = NowMs();
        CHECK_ERR(vsocket_recv_inplace(fd, &view, 100, 0), EAGAIN);
        int64_t waited = NowMs() - t0;
        CHECK(waited >= 90 && waited < 2000, "timeout after %lld ms",
              static_cast<long long>(waited));
        tv = {0, 0};
        CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "timeo");

        // 1000 bytes arrive.
        ctl.Send(0, 1);
        CHECK(ctl.Recv(0) == 1000, "client sent");
        while (Readable(fd) < 1000) usleep(1000);
        ssize_t n = vsocket_recv_inplace(fd, &view, 5000, 0);
        CHECK(n > 0 && n <= 1000, "view %zd", n);
        CHECK(CheckPattern(7, 0, static_cast<const uint8_t*>(view), n) ==
                  static_cast<size_t>(n), "view content");
        const void* other = nullptr;
        CHECK_ERR(vsocket_recv_inplace(fd, &other, 10, 0), EBUSY);
        CHECK_ERR(vsocket_recv_release(fd, n + 1), EINVAL);
        CHECK_ERR(vsocket_recv_inplace(fd, &other, 10, MSG_DONTWAIT), EBUSY);  // still out
        CHECK(Readable(fd) == 1000, "a view consumes nothing");
        CHECK(vsocket_recv_release(fd, 0) == 0, "release 0");
        CHECK(Readable(fd) == 1000, "release 0 consumes nothing");
        ssize_t again = vsocket_recv_inplace(fd, &other, 5000, 0);
        CHECK(again == n, "the same bytes again: %zd vs %zd", again, n);
        if (mode == "shm") CHECK(other == view, "the same place in the ring");
        CHECK(vsocket_recv_release(fd, 10) == 0, "release 10");
        off += 10;
        CHECK(Readable(fd) == 990, "FIONREAD %d", Readable(fd));
        uint8_t buf[64];
        CHECK(vsocket_recv(fd, buf, 20, 0) == 20, "recv after release");
        CHECK(CheckPattern(7, off, buf, 20) == 20, "recv content after release");
        off += 20;
        while (off < 1000) {  // the rest through views
          n = vsocket_recv_inplace(fd, &view, 1000, 0);
          CHECK(n > 0, "view");
          CHECK(CheckPattern(7, off, static_cast<const uint8_t*>(view), n) ==
                    static_cast<size_t>(n), "view content at %llu",
                static_cast<unsigned long long>(off));
          CHECK(vsocket_recv_release(fd, n) == 0, "release");
          off += n;
        }
        CHECK(Readable(fd) == 0, "all consumed");

        if (ring) {
          // Ring space goes back to the sender only at the release.
          ctl.Send(0, 2);  // client: fill the ring
          int64_t filled = ctl.Recv(0);
          n = vsocket_recv_inplace(fd, &view, 1 << 20, 0);
          CHECK(n > 0, "view of a full ring");
          ctl.Send(0, 3);  // client: a non-blocking send must still fail
          CHECK(ctl.Recv(0) == EAGAIN, "the view's bytes were credited early");
          CHECK(vsocket_recv_release(fd, n) == 0, "release");
          ctl.Send(0, 4);  // client: now it fits
          int64_t sent = ctl.Recv(0);
          CHECK(sent > 0, "send after release");
          auto rep = RecvMixed(fd, 7, off + n, filled + sent - n);
          CHECK(rep.error.empty(), "%s", rep.error.c_str());
          off += filled + sent;

          // Deregister while a send is blocked on a full ring: EBUSY.
          ctl.Send(0, 5);
          int64_t pending = ctl.Recv(0);  // bytes the client will have sent
          rep = RecvMixed(fd, 7, off, pending);
          CHECK(rep.error.empty(), "%s", rep.error.c_str());
          off += pending;
        }

        // End of stream.
        ctl.Send(0, 6);  // client: shutdown(SHUT_WR)
        CHECK(vsocket_recv_inplace(fd, &view, 100, 0) == 0, "EOF");
        CHECK(vsocket_recv_inplace(fd, &view, 100, MSG_DONTWAIT) == 0, "EOF again");
        vsocket_close(fd);  // client: EPIPE next
        ctl.Send(0, 7);
        ctl.Recv(0);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, int port) {
        Configure(mode);
        int fd = Connect(port);
        ExpectTransport(fd, mode);
        std::vector<uint8_t> buf(256 << 10);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        uint64_t off = 0;  // stream offset sent so far
        auto send_reg = [&](size_t len, int flags) -> ssize_t {
          FillPattern(7, off, buf.data(), len);
          ssize_t n = vsocket_send_registered(fd, r, 0, len, flags);
          if (n > 0) off += static_cast<uint64_t>(n);
          return n;
        };
        CHECK(ctl.Recv(1) == 1, "step 1");
        // Out-of-range sends fail before anything is sent.
        CHECK_ERR(vsocket_send_registered(fd, r, buf.size(), 1, 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(fd, r, 1, buf.size(), 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(fd, r, SIZE_MAX, 2, 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(fd, nullptr, 0, 1, 0), EINVAL);
        CHECK(vsocket_send_registered(fd, r, 0, 0, 0) == 0, "zero bytes");
        CHECK(send_reg(1000, 0) == 1000, "send 1000");
        ctl.Send(1, 1000);

        int64_t step = ctl.Recv(1);
        if (step == 2) {
          int64_t filled = 0;
          for (;;) {
            ssize_t n = send_reg(4096, MSG_DONTWAIT);
            if (n < 0) {
              CHECK(errno == EAGAIN, "fill");
              break;
            }
            filled += n;
          }
          CHECK(filled >= 60000 && filled <= 65536, "filled %lld",
                static_cast<long long>(filled));
          ctl.Send(1, filled);
          CHECK(ctl.Recv(1) == 3, "step 3");
          ssize_t n = send_reg(1, MSG_DONTWAIT);
          int dontwait_err = n < 0 ? errno : 0;
          // SO_SNDTIMEO bounds a blocking registered send on the full ring.
          struct timeval tv = {0, 100000};
          CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0, "timeo");
          int64_t t0 = NowMs();
          CHECK_ERR(send_reg(1, 0), EAGAIN);
          int64_t waited = NowMs() - t0;
          CHECK(waited >= 90 && waited < 3000, "send timeout after %lld ms",
                static_cast<long long>(waited));
          tv = {0, 0};
          CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0, "timeo");
          ctl.Send(1, dontwait_err);  // the server releases its view next
          CHECK(ctl.Recv(1) == 4, "step 4");
          n = send_reg(1024, MSG_DONTWAIT);
          ctl.Send(1, n);

          CHECK(ctl.Recv(1) == 5, "step 5");
          uint64_t before = off;
          for (;;) {  // fill again
            ssize_t k = send_reg(4096, MSG_DONTWAIT);
            if (k < 0) break;
          }
          // A blocking send from a second region, and its deregister.
          std::vector<uint8_t> big(32 << 10);
          vsocket_region* r2 = vsocket_register(big.data(), big.size());
          CHECK(r2 != nullptr, "register 2");
          FillPattern(7, off, big.data(), big.size());
          std::atomic<ssize_t> result{-2};
          std::thread sender([&] {
            result = vsocket_send_registered(fd, r2, 0, big.size(), 0);
          });
          usleep(100000);
          CHECK(result.load() == -2, "the send did not block");
          CHECK_ERR(vsocket_deregister(r2), EBUSY);
          ctl.Send(1, static_cast<int64_t>(off - before + big.size()));
          sender.join();
          CHECK(result.load() == static_cast<ssize_t>(big.size()), "blocked send %zd",
                result.load());
          off += big.size();
          CHECK(vsocket_deregister(r2) == 0, "deregister 2");
          step = ctl.Recv(1);
        }
        CHECK(step == 6, "step 6");
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        CHECK(ctl.Recv(1) == 7, "step 7");  // the server closed
        // Writing to a closed peer: EPIPE (TCP may say ECONNRESET once).
        ssize_t n;
        while ((n = send_reg(100, MSG_NOSIGNAL)) >= 0) usleep(1000);
        CHECK(errno == EPIPE || (mode == "tcp" && errno == ECONNRESET), "after close");
        static std::atomic<int> sigpipes{0};
        signal(SIGPIPE, [](int) { sigpipes++; });
        CHECK_ERR(send_reg(100, 0), EPIPE);
        CHECK(sigpipes.load() == 1, "SIGPIPE %d", sigpipes.load());
        CHECK_ERR(send_reg(100, MSG_NOSIGNAL), EPIPE);
        CHECK(sigpipes.load() == 1, "SIGPIPE with MSG_NOSIGNAL");
        ctl.Send(1, 0);
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(fd);
      });
  EXPECT_TRUE(ok);
}

INSTANTIATE_TEST_SUITE_P(
    Transports, ZeroCopyApi, testing::Values("shm", "tcp"),
    [](const testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
