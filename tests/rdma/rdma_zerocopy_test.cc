// The explicit API's zero-copy calls on RDMA (vsocket_send_registered,
// vsocket_recv_inplace / vsocket_recv_release), between two processes in one
// Soft-RoCE guest (tests/rdma/run-suite.sh).  Each scenario runs in its own
// process tree: a server child and a client child, each of which sets
// VSOCKET_TRANSPORT=rdma before its first vsocket call.  Exits 77 (ctest
// SKIP) without an RDMA device; uses VSOCKET_RDMA_SELF_IP (the guest's rxe
// address).
//
//   rdma_zerocopy_test                  every scenario
//   rdma_zerocopy_test NAME...          some (integrity reuse semantics kill
//                                       throughput)
//   VSOCKET_RDMA_TEST_MB=32             bytes each way for `integrity`
#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "scenario_harness.h"
#include "vsocket/vsocket.h"
#include "zerocopy_stream.h"

namespace {

using vsocket_zc_test::CheckPattern;
using vsocket_zc_test::FillPattern;
using vsocket_zc_test::RecvMixed;
using vsocket_zc_test::SendMixed;

using vsocket_rdma_test::Connect;
using vsocket_rdma_test::Ctl;
using vsocket_rdma_test::Listen;
using vsocket_rdma_test::NowUs;
using vsocket_rdma_test::RunPair;
using vsocket_rdma_test::RunScenarios;
using vsocket_rdma_test::Scenario;

void UseRdma(const char* ring = "1M") {
  setenv("VSOCKET_TRANSPORT", "rdma", 1);
  setenv("VSOCKET_RDMA_RING_SIZE", ring, 1);
}

void ExpectRdma(int fd) {
  const char* name = vsocket_transport_name(fd);
  CHECK(name && strcmp(name, "rdma") == 0, "transport %s (%s)",
        name ? name : "null", vsocket_fallback_reason(fd));
}

int Accept(int lfd) {
  int fd = vsocket_accept(lfd, nullptr, nullptr);
  CHECK(fd >= 0, "accept");
  ExpectRdma(fd);
  return fd;
}

// A number in the stats line after `key` (e.g. "\"user_region_bytes\":"),
// or -1 if absent.
long long StatsValue(const char* key) {
  char json[4096];
  vsocket_stats_json(json, sizeof(json));
  const char* p = strstr(json, key);
  if (!p) return -1;
  return strtoll(p + strlen(key), nullptr, 10);
}
long long RdmaBytes(const char* which) {
  char json[4096];
  vsocket_stats_json(json, sizeof(json));
  const char* p = strstr(json, "\"rdma\":{");
  if (!p) return -1;
  char key[64];
  snprintf(key, sizeof(key), "\"%s\":", which);
  const char* q = strstr(p, key);
  const char* end = strchr(p, '}');
  if (!q || (end && q > end)) return 0;
  return strtoll(q + strlen(key), nullptr, 10);
}

constexpr size_t kRegion = 4 << 20;

// --- integrity: N MiB each way, registered sends and in-place receives
//     mixed with send/recv, every byte checked; stats ---------------------
int Integrity() {
  uint64_t mb = 32;
  if (const char* v = getenv("VSOCKET_RDMA_TEST_MB")) mb = strtoull(v, nullptr, 10);
  const uint64_t total = mb << 20;
  return RunPair(
      [&](Ctl& ctl) {
        UseRdma();
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = Accept(lfd);
        int64_t t0 = NowUs();
        auto in = RecvMixed(fd, 11, 0, total);
        CHECK(in.error.empty(), "%s", in.error.c_str());
        double secs = (NowUs() - t0) / 1e6;
        CHECK(in.inplace > total / 4, "in place only %llu",
              static_cast<unsigned long long>(in.inplace));
        CHECK(RdmaBytes("bytes_received") == static_cast<long long>(total),
              "bytes_received %lld", RdmaBytes("bytes_received"));
        // Answer with a stream of our own, also from a registered region.
        std::vector<uint8_t> buf(kRegion);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        auto out = SendMixed(fd, r, buf.data(), buf.size(), 12, 0, total);
        CHECK(out.error.empty(), "%s", out.error.c_str());
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        const void* view;
        CHECK(vsocket_recv_inplace(fd, &view, 1, 0) == 0, "client's EOF");
        printf("  integrity: %llu MiB received in %.2f s (%.1f MB/s), %llu in place "
               "in %llu views\n", static_cast<unsigned long long>(mb), secs,
               total / secs / 1e6, static_cast<unsigned long long>(in.inplace),
               static_cast<unsigned long long>(in.views));
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        UseRdma();
        std::vector<uint8_t> buf(kRegion);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        CHECK(StatsValue("\"user_region_bytes\":") == -1,
              "registered with a device before any use");
        int fd = Connect(static_cast<int>(ctl.Recv(1)));
        ExpectRdma(fd);
        auto out = SendMixed(fd, r, buf.data(), buf.size(), 11, 0, total);
        CHECK(out.error.empty(), "%s", out.error.c_str());
        CHECK(out.registered > total / 4, "registered only %llu",
              static_cast<unsigned long long>(out.registered));
        CHECK(RdmaBytes("bytes_sent") == static_cast<long long>(total),
              "bytes_sent %lld", RdmaBytes("bytes_sent"));
        // Registered once, with this device, for the whole region.
        CHECK(StatsValue("\"user_region_bytes\":") == static_cast<long long>(kRegion),
              "user_region_bytes %lld", StatsValue("\"user_region_bytes\":"));
        auto in = RecvMixed(fd, 12, 0, UINT64_MAX);
        CHECK(in.error.empty(), "%s", in.error.c_str());
        CHECK(in.eof && in.bytes == total, "answer %llu bytes",
              static_cast<unsigned long long>(in.bytes));
        CHECK(vsocket_deregister(r) == 0, "deregister");
        CHECK(StatsValue("\"user_region_bytes\":") == -1, "still counted after deregister");
        vsocket_close(fd);
      });
}

// --- reuse: one region, many sends, two connections at once --------------
int Reuse() {
  constexpr int kSends = 300;
  constexpr size_t kPiece = 64 << 10;
  return RunPair(
      [&](Ctl& ctl) {
        UseRdma();
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int a = Accept(lfd);
        int b = Accept(lfd);
        std::string err_a, err_b;
        std::thread ta([&] {
          err_a = RecvMixed(a, 21, 0, uint64_t{kSends} * kPiece).error;
        });
        std::thread tb([&] {
          err_b = RecvMixed(b, 22, 0, uint64_t{kSends} * kPiece).error;
        });
        ta.join();
        tb.join();
        CHECK(err_a.empty(), "a: %s", err_a.c_str());
        CHECK(err_b.empty(), "b: %s", err_b.c_str());
        ctl.Send(0, 1);
        vsocket_close(a);
        vsocket_close(b);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        UseRdma();
        int port = static_cast<int>(ctl.Recv(1));
        int a = Connect(port);
        int b = Connect(port);
        ExpectRdma(a);
        ExpectRdma(b);
        std::vector<uint8_t> buf(2 * kPiece);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        int64_t t0 = NowUs();
        for (int i = 0; i < kSends; ++i) {
          // Alternate connections and halves of the region; overwrite the
          // bytes as soon as each call returns.
          for (int side = 0; side < 2; ++side) {
            uint8_t* p = buf.data() + (i & 1) * kPiece;
            FillPattern(21 + side, uint64_t(i) * kPiece, p, kPiece);
            ssize_t n = vsocket_send_registered(side ? b : a, r, (i & 1) * kPiece,
                                                kPiece, MSG_NOSIGNAL);
            CHECK(n == static_cast<ssize_t>(kPiece), "send %d/%d: %zd", i, side, n);
            memset(p, 0xA5, kPiece);
          }
        }
        double secs = (NowUs() - t0) / 1e6;
        CHECK(StatsValue("\"user_region_bytes\":") == static_cast<long long>(buf.size()),
              "one registration per device, not per connection: %lld",
              StatsValue("\"user_region_bytes\":"));
        CHECK(ctl.Recv(1) == 1, "server done");
        printf("  reuse: %d x 64 KiB on each of 2 connections from one region in "
               "%.2f s (%.1f MB/s total)\n", kSends, secs,
               2.0 * kSends * kPiece / secs / 1e6);
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(a);
        vsocket_close(b);
      });
}

// --- semantics: errors, EBUSY, release, credits only at the release,
//     EAGAIN, EOF --------------------------------------------------------
int Semantics() {
  return RunPair(
      [&](Ctl& ctl) {
        UseRdma("64K");
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = Accept(lfd);
        const void* view = nullptr;
        CHECK_ERR(vsocket_recv_inplace(fd, &view, 100, MSG_DONTWAIT), EAGAIN);
        CHECK_ERR(vsocket_recv_release(fd, 0), EINVAL);
        ctl.Send(0, 1);  // client: 1000 bytes
        CHECK(ctl.Recv(0) == 1000, "sent");
        int avail = 0;
        for (int i = 0; i < 5000 && avail < 1000; ++i) {
          CHECK(vsocket_ioctl(fd, FIONREAD, &avail) == 0, "FIONREAD");
          if (avail < 1000) usleep(1000);
        }
        ssize_t n = vsocket_recv_inplace(fd, &view, 4096, 0);
        CHECK(n == 1000, "view %zd", n);
        CHECK(CheckPattern(31, 0, static_cast<const uint8_t*>(view), n) == 1000, "content");
        const void* other;
        CHECK_ERR(vsocket_recv_inplace(fd, &other, 10, 0), EBUSY);
        CHECK_ERR(vsocket_recv_release(fd, 1001), EINVAL);
        CHECK(vsocket_recv_release(fd, 0) == 0, "release 0");
        CHECK(vsocket_recv_inplace(fd, &other, 4096, 0) == 1000 && other == view,
              "the same bytes in the same place");
        CHECK(vsocket_recv_release(fd, 100) == 0, "release 100");
        char buf[64];
        CHECK(vsocket_recv(fd, buf, 50, 0) == 50, "recv");
        CHECK(CheckPattern(31, 100, reinterpret_cast<uint8_t*>(buf), 50) == 50, "recv content");
        n = vsocket_recv_inplace(fd, &view, 4096, 0);
        CHECK(n == 850, "rest %zd", n);
        CHECK(vsocket_recv_release(fd, n) == 0, "release rest");
        uint64_t off = 1000;

        // Credits: with the ring full and a view outstanding, the sender
        // cannot send; after the release it can.
        ctl.Send(0, 2);  // client: fill
        int64_t filled = ctl.Recv(0);
        n = vsocket_recv_inplace(fd, &view, 1 << 20, 0);
        CHECK(n > 0, "view");
        ctl.Send(0, 3);  // client: non-blocking send_registered
        CHECK(ctl.Recv(0) == EAGAIN, "credited before the release");
        // Consume the whole ring: the peer gets its credit.
        CHECK(vsocket_recv_release(fd, n) == 0, "release");
        auto rep = RecvMixed(fd, 31, off + n, filled - n);
        CHECK(rep.error.empty(), "%s", rep.error.c_str());
        off += filled;
        ctl.Send(0, 4);  // client: a blocking send larger than the ring
        int64_t sent = ctl.Recv(0);
        rep = RecvMixed(fd, 31, off, sent);
        CHECK(rep.error.empty(), "%s", rep.error.c_str());
        off += sent;
        ctl.Send(0, 5);  // client: shutdown
        CHECK(vsocket_recv_inplace(fd, &view, 100, 0) == 0, "EOF");
        CHECK(vsocket_recv_inplace(fd, &view, 100, MSG_DONTWAIT) == 0, "EOF again");
        vsocket_close(fd);
        ctl.Send(0, 6);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        UseRdma("64K");
        int fd = Connect(static_cast<int>(ctl.Recv(1)));
        ExpectRdma(fd);
        std::vector<uint8_t> buf(256 << 10);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        uint64_t off = 0;
        auto send_reg = [&](size_t len, int flags) -> ssize_t {
          FillPattern(31, off, buf.data(), len);
          ssize_t n = vsocket_send_registered(fd, r, 0, len, flags);
          if (n > 0) off += static_cast<uint64_t>(n);
          return n;
        };
        CHECK_ERR(vsocket_send_registered(fd, r, buf.size(), 1, 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(fd, r, 1, buf.size(), 0), EINVAL);
        CHECK_ERR(vsocket_send_registered(fd, nullptr, 0, 1, 0), EINVAL);
        CHECK(vsocket_send_registered(fd, r, 0, 0, 0) == 0, "zero bytes");
        CHECK(ctl.Recv(1) == 1, "step 1");
        CHECK(send_reg(1000, 0) == 1000, "1000");
        ctl.Send(1, 1000);
        CHECK(ctl.Recv(1) == 2, "step 2");
        int64_t filled = 0;
        for (;;) {
          ssize_t n = send_reg(8192, MSG_DONTWAIT);
          if (n < 0) {
            CHECK(errno == EAGAIN, "fill");
            break;
          }
          filled += n;
        }
        CHECK(filled > 0 && filled <= 65536, "filled %lld", static_cast<long long>(filled));
        ctl.Send(1, filled);
        CHECK(ctl.Recv(1) == 3, "step 3");
        ssize_t n = send_reg(1, MSG_DONTWAIT);
        int dontwait_err = n < 0 ? errno : 0;
        // SO_SNDTIMEO bounds a blocking registered send on the full ring.
        struct timeval tv = {0, 100000};
        CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0, "timeo");
        int64_t t0 = NowUs() / 1000;
        CHECK_ERR(send_reg(1, 0), EAGAIN);
        int64_t waited = NowUs() / 1000 - t0;
        CHECK(waited >= 90 && waited < 3000, "send timeout after %lld ms",
              static_cast<long long>(waited));
        tv = {0, 0};
        CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0, "timeo");
        ctl.Send(1, dontwait_err);  // the server releases its view next
        CHECK(ctl.Recv(1) == 4, "step 4");
        ctl.Send(1, 100000);  // the server reads it while we send
        n = send_reg(100000, 0);  // more than the ring: waits for credits
        CHECK(n == 100000, "blocking send %zd", n);
        CHECK(ctl.Recv(1) == 5, "step 5");
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        CHECK(ctl.Recv(1) == 6, "step 6");
        CHECK(vsocket_deregister(r) == 0, "deregister");
        vsocket_close(fd);
      });
}

// --- kill: the peer dies while we are blocked in a registered send, and
//     an in-place receive then fails too: ECONNRESET, no hang -------------
int Kill() {
  return RunPair(
      [&](Ctl& ctl) {
        UseRdma();
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = Accept(lfd);
        CHECK(vsocket_send(fd, "x", 1, 0) == 1, "x");
        pause();  // killed by the client, never reads
      },
      [&](Ctl& ctl, pid_t server) {
        UseRdma();
        int fd = Connect(static_cast<int>(ctl.Recv(1)));
        ExpectRdma(fd);
        const void* view;
        CHECK(vsocket_recv_inplace(fd, &view, 10, 0) == 1, "x");
        CHECK(vsocket_recv_release(fd, 1) == 0, "release");
        std::vector<uint8_t> buf(8 << 20, 0x42);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        std::thread killer([server] {
          usleep(300000);
          kill(server, SIGKILL);
        });
        int64_t killed_at = NowUs() + 300000;
        ssize_t n = vsocket_send_registered(fd, r, 0, buf.size(), MSG_NOSIGNAL);
        int err = errno;
        killer.join();
        printf("  kill: blocked send_registered returned %zd errno %d, +%lld ms "
               "after the SIGKILL\n", n, err, (long long)(NowUs() - killed_at) / 1000);
        CHECK(n == -1 && err == ECONNRESET, "send after kill: %zd errno %d", n, err);
        CHECK(NowUs() - killed_at < 5000000, "reset took too long");
        CHECK_ERR(vsocket_recv_inplace(fd, &view, 10, 0), ECONNRESET);
        CHECK_ERR(vsocket_send_registered(fd, r, 0, 10, MSG_NOSIGNAL), ECONNRESET);
        CHECK(vsocket_deregister(r) == 0, "deregister after reset");
        vsocket_close(fd);
      });
}

// --- throughput: copy path vs zero-copy path, one way, 1 MiB pieces ------
int Throughput() {
  constexpr uint64_t kTotal = uint64_t{64} << 20;
  constexpr size_t kPiece = 1 << 20;
  return RunPair(
      [&](Ctl& ctl) {
        UseRdma();
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        for (int round = 0; round < 2; ++round) {
          int fd = Accept(lfd);
          std::vector<uint8_t> buf(kPiece);
          uint64_t got = 0;
          while (got < kTotal) {
            ssize_t n;
            if (round == 0) {
              n = vsocket_recv(fd, buf.data(), buf.size(), 0);
            } else {
              const void* view;
              n = vsocket_recv_inplace(fd, &view, kPiece, 0);
              if (n > 0) CHECK(vsocket_recv_release(fd, n) == 0, "release");
            }
            CHECK(n > 0, "recv %zd", n);
            got += n;
          }
          ctl.Send(0, 1);
          vsocket_close(fd);
        }
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        UseRdma();
        int port = static_cast<int>(ctl.Recv(1));
        std::vector<uint8_t> buf(kPiece, 0x33);
        vsocket_region* r = vsocket_register(buf.data(), buf.size());
        CHECK(r != nullptr, "register");
        double mbs[2];
        for (int round = 0; round < 2; ++round) {
          int fd = Connect(port);
          ExpectRdma(fd);
          int64_t t0 = NowUs();
          for (uint64_t sent = 0; sent < kTotal; sent += kPiece) {
            ssize_t n = round == 0 ? vsocket_send(fd, buf.data(), kPiece, 0)
                                   : vsocket_send_registered(fd, r, 0, kPiece, 0);
            CHECK(n == static_cast<ssize_t>(kPiece), "send %zd", n);
          }
          CHECK(ctl.Recv(1) == 1, "received");
          mbs[round] = kTotal / ((NowUs() - t0) / 1e6) / 1e6;
          vsocket_close(fd);
        }
        printf("  throughput, 64 MiB in 1 MiB pieces: send+recv %.1f MB/s, "
               "send_registered+recv_inplace %.1f MB/s\n", mbs[0], mbs[1]);
        CHECK(vsocket_deregister(r) == 0, "deregister");
      });
}

constexpr Scenario kScenarios[] = {
    {"semantics", Semantics}, {"integrity", Integrity}, {"reuse", Reuse},
    {"kill", Kill}, {"throughput", Throughput}};

// Every scenario's children end in SIGALRM after this long, never hanging
// the suite.
constexpr unsigned kPairAlarmSeconds = 300;

}  // namespace

int main(int argc, char** argv) {
  return RunScenarios(argc, argv, kScenarios, kPairAlarmSeconds);
}
