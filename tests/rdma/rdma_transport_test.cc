// RdmaTransport through the public vsocket API, between two processes in one
// Soft-RoCE guest (tests/rdma/run-suite.sh).  Each scenario runs in its own
// process tree: a server child and a client child, each of which sets its
// VSOCKET_* environment before its first vsocket call.  Exits 77 (ctest
// SKIP) without an RDMA device; needs VSOCKET_RDMA_SELF_IP (the guest's
// rxe address) otherwise.
//
//   rdma_transport_test                  every scenario
//   rdma_transport_test NAME...          some (integrity plain_server
//                                        tcp_policy kill readiness fork stats
//                                        stats_per_connection
//                                        waiters pingpong spin_then_sleep
//                                        user_space_poll concurrent_connects
//                                        late_accept)
//   VSOCKET_RDMA_TEST_MB=64              bytes for `integrity` (default 64)
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "exact_io.h"
#include "scenario_harness.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_rdma_test::Addr;
using vsocket_rdma_test::Connect;
using vsocket_rdma_test::Ctl;
using vsocket_rdma_test::Fail;
using vsocket_rdma_test::g_role;
using vsocket_rdma_test::Listen;
using vsocket_rdma_test::NowUs;
using vsocket_rdma_test::RunPair;
using vsocket_rdma_test::RunScenarios;
using vsocket_rdma_test::Scenario;
using vsocket_rdma_test::SelfIp;

// Deterministic stream content: byte i of stream `seed`.
uint8_t PatternByte(uint64_t seed, uint64_t i) {
  uint64_t z = (i >> 3) + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> (8 * (i & 7)));
}

void FillPattern(uint64_t seed, uint64_t offset, uint8_t* buf, size_t len) {
  for (size_t k = 0; k < len; ++k) buf[k] = PatternByte(seed, offset + k);
}

std::string Name(int fd) {
  const char* n = vsocket_transport_name(fd);
  return n ? n : "(null)";
}
std::string Reason(int fd) {
  const char* r = vsocket_fallback_reason(fd);
  return r ? r : "(null)";
}

void SendAll(int fd, const void* buf, size_t len) {
  vsocket_test::SendAll(vsocket_test::VsocketApi(), fd, buf, len);
}

// --- integrity: 2 x N MiB through an echo server, full duplex -------------
int Integrity() {
  uint64_t mb = 64;
  if (const char* v = getenv("VSOCKET_RDMA_TEST_MB")) mb = strtoull(v, nullptr, 10);
  const uint64_t total = mb << 20;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0, "accept");
        CHECK(Name(fd) == "rdma", "server transport %s (%s)", Name(fd).c_str(),
              Reason(fd).c_str());
        std::vector<char> buf(256 << 10);
        uint64_t echoed = 0;
        for (;;) {
          ssize_t n = vsocket_recv(fd, buf.data(), buf.size(), 0);
          CHECK(n >= 0, "server recv");
          if (n == 0) break;
          SendAll(fd, buf.data(), static_cast<size_t>(n));
          echoed += static_cast<uint64_t>(n);
        }
        CHECK(echoed == total, "echoed %llu of %llu", (unsigned long long)echoed,
              (unsigned long long)total);
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        char c;
        CHECK(vsocket_recv(fd, &c, 1, 0) == 0, "EOF twice");
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "client transport %s (%s)", Name(fd).c_str(),
              Reason(fd).c_str());
        int64_t start = NowUs();
        std::atomic<bool> send_failed{false};
        std::thread sender([&] {
          std::vector<uint8_t> chunk(1 << 20);
          uint64_t off = 0;
          unsigned rnd = 1;
          while (off < total) {
            rnd = rnd * 1103515245u + 12345u;
            size_t len = 1 + (rnd >> 8) % chunk.size();  // 1 B .. 1 MiB
            if (len > total - off) len = static_cast<size_t>(total - off);
            FillPattern(7, off, chunk.data(), len);
            const uint8_t* p = chunk.data();
            size_t left = len;
            while (left > 0) {
              ssize_t n = vsocket_send(fd, p, left, MSG_NOSIGNAL);
              if (n <= 0) {
                send_failed = true;
                return;
              }
              p += n;
              left -= static_cast<size_t>(n);
            }
            off += len;
          }
          vsocket_shutdown(fd, SHUT_WR);
        });
        std::vector<uint8_t> buf(192 << 10);
        uint64_t got = 0;
        for (;;) {
          ssize_t n = vsocket_recv(fd, buf.data(), buf.size(), 0);
          CHECK(n >= 0, "client recv");
          if (n == 0) break;
          for (ssize_t k = 0; k < n; ++k) {
            if (buf[k] != PatternByte(7, got + k)) {
              Fail(__FILE__, __LINE__, "corrupt byte at offset %llu",
                   (unsigned long long)(got + k));
            }
          }
          got += static_cast<uint64_t>(n);
        }
        sender.join();
        CHECK(!send_failed, "send failed");
        CHECK(got == total, "got %llu of %llu", (unsigned long long)got,
              (unsigned long long)total);
        double secs = (NowUs() - start) / 1e6;
        printf("  integrity: %llu MiB each way verified in %.2f s "
               "(%.1f MB/s each way)\n", (unsigned long long)mb, secs,
               total / secs / 1e6);
        char json[2048];
        vsocket_stats_json(json, sizeof(json));
        printf("  client stats: %s\n", json);
        CHECK(strstr(json, "\"rdma\":{\"connections\":1") != nullptr,
              "stats lack the rdma connection: %s", json);
        CHECK(strstr(json, "\"rdma_registered\":{\"bytes\":") != nullptr,
              "stats lack registered bytes: %s", json);
        vsocket_close(fd);
        vsocket_stats_json(json, sizeof(json));
        CHECK(strstr(json, "\"rdma_registered\":{\"bytes\":0,") != nullptr,
              "registered bytes not returned at close: %s", json);
      });
}

// --- plain_server: the listener is a plain TCP program ---------------------
int PlainServer() {
  return RunPair(
      [&](Ctl& ctl) {
        int lfds[2];
        for (int& lfd : lfds) {
          lfd = socket(AF_INET, SOCK_STREAM, 0);  // not vsocket
          sockaddr_in a = Addr(SelfIp(), 0);
          CHECK(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
          CHECK(listen(lfd, 16) == 0, "listen");
          socklen_t len = sizeof(a);
          getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
          ctl.Send(0, ntohs(a.sin_port));
        }
        for (int round = 0; round < 3; ++round) {
          int fd = accept(lfds[round / 2], nullptr, nullptr);
          CHECK(fd >= 0, "accept");
          std::string got;
          char buf[256];
          ssize_t n;
          while ((n = read(fd, buf, sizeof(buf))) > 0) got.append(buf, n);
          CHECK(got == "hello plain", "server got '%s' (stray bytes?)", got.c_str());
          CHECK(write(fd, "bye", 3) == 3, "write");
          close(fd);
        }
        close(lfds[0]);
        close(lfds[1]);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int ports[2];
        ports[0] = ctl.Recv(1);
        ports[1] = ctl.Recv(1);
        // Round 0: first RDMA use of the process (registers the memory pool:
        // slow under TCG).  Round 1: same destination, answered by the
        // negative cache.  Round 2: another port, warm: the probe alone.
        const char* what[] = {"cold", "cached", "warm"};
        const int64_t limit_us[] = {5000000, 50000, 1000000};
        for (int round = 0; round < 3; ++round) {
          int64_t us = 0;
          int fd = Connect(ports[round / 2], &us);
          printf("  plain_server: %s connect took %lld us -> %s (%s)\n",
                 what[round], (long long)us, Name(fd).c_str(), Reason(fd).c_str());
          CHECK(Name(fd) == "tcp", "transport %s", Name(fd).c_str());
          CHECK(Reason(fd) == "peer_not_vsocket", "reason %s", Reason(fd).c_str());
          CHECK(us < limit_us[round], "%s connect took %lld us", what[round],
                (long long)us);
          SendAll(fd, "hello plain", 11);
          CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
          char buf[16];
          ssize_t n = vsocket_recv(fd, buf, sizeof(buf), MSG_WAITALL);
          CHECK(n == 3 && memcmp(buf, "bye", 3) == 0, "reply");
          vsocket_close(fd);
        }
      });
}

// --- tcp_policy: VSOCKET_TRANSPORT=tcp on the client ------------------------
int TcpPolicy() {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0, "accept");
        CHECK(Name(fd) == "tcp", "server transport %s", Name(fd).c_str());
        char buf[8];
        CHECK(vsocket_recv(fd, buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "ping", 4), "ping");
        SendAll(fd, "pong", 4);
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "tcp", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "tcp", "transport %s", Name(fd).c_str());
        CHECK(Reason(fd) == "disabled_by_config", "reason %s", Reason(fd).c_str());
        SendAll(fd, "ping", 4);
        char buf[8];
        CHECK(vsocket_recv(fd, buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "pong", 4), "pong");
        vsocket_close(fd);
      });
}

// --- kill: SIGKILL of the peer -> ECONNRESET, not a hang --------------------
int Kill() {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        SendAll(fd, "x", 1);
        pause();  // killed by the client
      },
      [&](Ctl& ctl, pid_t server) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        char c;
        CHECK(vsocket_recv(fd, &c, 1, 0) == 1 && c == 'x', "first byte");
        std::thread killer([server] {
          usleep(300000);
          kill(server, SIGKILL);
        });
        int64_t start = NowUs();
        ssize_t n = vsocket_recv(fd, &c, 1, 0);  // blocks until the kill
        int err = errno;
        int64_t killed_at = start + 300000;
        killer.join();
        printf("  kill: blocked recv returned %zd errno %d after the SIGKILL "
               "+%lld ms\n", n, err, (long long)(NowUs() - killed_at) / 1000);
        CHECK(n == -1 && err == ECONNRESET, "recv after kill: %zd errno %d", n, err);
        CHECK(NowUs() - killed_at < 3000000, "reset took too long");
        struct pollfd pfd = {fd, POLLIN, 0};
        CHECK(vsocket_poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN),
              "a reset connection must poll readable");
        n = vsocket_send(fd, "y", 1, MSG_NOSIGNAL);
        CHECK(n == -1 && (errno == ECONNRESET || errno == EPIPE), "send after reset");
        int soerr = -1;
        socklen_t len = sizeof(soerr);
        CHECK(vsocket_getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0, "SO_ERROR");
        vsocket_close(fd);
      });
}

// --- late_accept: a server that calls accept() long after the client's
//     connect() returned (a slow or loaded server) gets the connection as
//     the kernel would keep it in its backlog: on RDMA, with the bytes the
//     client wrote meanwhile, not reset after VSOCKET_CLAIM_TIMEOUT_MS.
//     The parked channel outlives several timeouts (300 ms here, accept()
//     after 1.5 s), and a second connection made while the first waits
//     gets through the same way. ----------------------------------------
int LateAccept() {
  constexpr int kConns = 2;
  constexpr int kBytes = 1000;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_CLAIM_TIMEOUT_MS", "300", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        CHECK(ctl.Recv(0) == kConns, "client connected");
        usleep(1500000);  // five claim timeouts
        for (int i = 0; i < kConns; ++i) {
          int fd = vsocket_accept(lfd, nullptr, nullptr);
          CHECK(fd >= 0, "accept %d", i);
          CHECK(Name(fd) == "rdma", "accept %d: transport %s (%s)", i,
                Name(fd).c_str(), Reason(fd).c_str());
          std::vector<uint8_t> got(kBytes);
          vsocket_test::RecvAll(vsocket_test::VsocketApi(), fd, got.data(), got.size());
          std::vector<uint8_t> want(kBytes);  // the backlog is in order
          FillPattern(static_cast<uint64_t>(i), 0, want.data(), want.size());
          CHECK(got == want, "accept %d: the bytes written before accept() differ", i);
          SendAll(fd, got.data(), got.size());  // echoed
          vsocket_close(fd);
        }
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port = static_cast<int>(ctl.Recv(1));
        int fds[kConns];
        for (int i = 0; i < kConns; ++i) {
          fds[i] = Connect(port);
          CHECK(Name(fds[i]) == "rdma", "connect %d: transport %s (%s)", i,
                Name(fds[i]).c_str(), Reason(fds[i]).c_str());
          std::vector<uint8_t> data(kBytes);
          FillPattern(static_cast<uint64_t>(i), 0, data.data(), data.size());
          SendAll(fds[i], data.data(), data.size());
        }
        ctl.Send(1, kConns);
        for (int i = 0; i < kConns; ++i) {
          std::vector<uint8_t> got(kBytes), want(kBytes);
          vsocket_test::RecvAll(vsocket_test::VsocketApi(), fds[i], got.data(), got.size());
          FillPattern(static_cast<uint64_t>(i), 0, want.data(), want.size());
          CHECK(got == want, "connection %d: echo differs", i);
          char c;
          CHECK(vsocket_recv(fds[i], &c, 1, 0) == 0, "connection %d: EOF", i);
          vsocket_close(fds[i]);
        }
      });
}

// --- readiness: poll/epoll, EAGAIN, FIONREAD, PEEK, WAITALL, timeouts,
//     POLLOUT under back-pressure, half-close, EPIPE/SIGPIPE ---------------
std::atomic<int> g_sigpipes{0};

int Readiness() {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        // 1: one byte for poll, then 3 pieces for WAITALL.
        CHECK(ctl.Recv(0) == 1, "step 1");
        SendAll(fd, "a", 1);
        CHECK(ctl.Recv(0) == 2, "step 2");
        SendAll(fd, "b", 1);  // for epoll
        CHECK(ctl.Recv(0) == 3, "step 3");
        for (const char* piece : {"12", "345", "6789"}) {
          usleep(50000);
          SendAll(fd, piece, strlen(piece));
        }
        // 4: the client fills our ring; we read everything once told.
        CHECK(ctl.Recv(0) == 4, "step 4");
        uint64_t filled = 0;
        CHECK(read(ctl.fds[0], &filled, sizeof(filled)) == sizeof(filled), "filled");
        std::vector<char> buf(1 << 20);
        uint64_t drained = 0;
        while (drained < filled) {
          ssize_t n = vsocket_recv(fd, buf.data(), buf.size(), 0);
          CHECK(n > 0, "drain");
          drained += static_cast<uint64_t>(n);
        }
        // 5: half-close from our side, then read what the client sends.
        CHECK(ctl.Recv(0) == 5, "step 5");
        CHECK(vsocket_shutdown(fd, SHUT_WR) == 0, "shutdown");
        char tail[8];
        CHECK(vsocket_recv(fd, tail, 5, MSG_WAITALL) == 5 && !memcmp(tail, "after", 5),
              "data after our SHUT_WR");
        // 6: close: the client's sends get EPIPE.
        CHECK(ctl.Recv(0) == 6, "step 6");
        vsocket_close(fd);
        ctl.Send(0, 7);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        char c;
        // Non-blocking: EAGAIN, and poll says not readable.
        CHECK(vsocket_recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN, "EAGAIN");
        struct pollfd pfd = {fd, POLLIN, 0};
        CHECK(vsocket_poll(&pfd, 1, 100) == 0, "readable with nothing sent");
        pfd.events = POLLOUT;
        CHECK(vsocket_poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT), "not writable");
        // poll wakes on arrival.
        ctl.Send(1, 1);
        int64_t t0 = NowUs();
        pfd = {fd, POLLIN, 0};
        CHECK(vsocket_poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN), "poll wake");
        printf("  readiness: poll woke %lld us after the request\n",
               (long long)(NowUs() - t0));
        int avail = -1;
        CHECK(vsocket_ioctl(fd, FIONREAD, &avail) == 0 && avail == 1, "FIONREAD %d", avail);
        CHECK(vsocket_recv(fd, &c, 1, MSG_PEEK) == 1 && c == 'a', "peek");
        CHECK(vsocket_recv(fd, &c, 1, MSG_DONTWAIT) == 1 && c == 'a', "read after peek");
        CHECK(vsocket_recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN, "EAGAIN 2");
        // epoll wakes on arrival.
        int ep = epoll_create1(0);
        struct epoll_event ev = {};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl");
        CHECK(epoll_wait(ep, &ev, 1, 100) == 0, "epoll readable too early");
        ctl.Send(1, 2);
        CHECK(epoll_wait(ep, &ev, 1, 5000) == 1 && (ev.events & EPOLLIN), "epoll wake");
        CHECK(vsocket_recv(fd, &c, 1, 0) == 1 && c == 'b', "byte b");
        close(ep);
        // SO_RCVTIMEO.
        struct timeval tv = {0, 200000};
        CHECK(vsocket_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "RCVTIMEO");
        t0 = NowUs();
        CHECK(vsocket_recv(fd, &c, 1, 0) == -1 && errno == EAGAIN, "timeout");
        int64_t waited = NowUs() - t0;
        CHECK(waited >= 180000 && waited < 2000000, "RCVTIMEO waited %lld us", (long long)waited);
        tv = {0, 0};
        vsocket_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        // MSG_WAITALL over three delayed pieces.
        ctl.Send(1, 3);
        char all[9];
        CHECK(vsocket_recv(fd, all, 9, MSG_WAITALL) == 9 && !memcmp(all, "123456789", 9),
              "WAITALL");
        // Back-pressure: fill the ring (non-blocking) until EAGAIN; then
        // POLLOUT is clear until the server reads.
        int fl = vsocket_fcntl(fd, F_GETFL);
        CHECK(vsocket_fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
        std::vector<char> junk(64 << 10, 'j');
        uint64_t filled = 0;
        for (;;) {
          ssize_t n = vsocket_send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
          if (n < 0) {
            CHECK(errno == EAGAIN, "fill: errno");
            break;
          }
          filled += static_cast<uint64_t>(n);
          CHECK(filled < (1ull << 30), "the ring never fills");
        }
        pfd = {fd, POLLOUT, 0};
        CHECK(vsocket_poll(&pfd, 1, 100) == 0, "writable with a full ring");
        ctl.Send(1, 4);
        CHECK(write(ctl.fds[1], &filled, sizeof(filled)) == sizeof(filled), "filled");
        t0 = NowUs();
        CHECK(vsocket_poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLOUT), "POLLOUT back");
        printf("  readiness: filled %llu bytes; POLLOUT back after %lld us\n",
               (unsigned long long)filled, (long long)(NowUs() - t0));
        CHECK(vsocket_fcntl(fd, F_SETFL, fl) == 0, "blocking again");
        // Half-close by the server: EOF here, poll readable, we can still send.
        ctl.Send(1, 5);
        CHECK(vsocket_recv(fd, &c, 1, 0) == 0, "EOF after the peer's SHUT_WR");
        pfd = {fd, POLLIN, 0};
        CHECK(vsocket_poll(&pfd, 1, 0) == 1, "EOF must poll readable");
        SendAll(fd, "after", 5);
        // Peer closed: EPIPE, with SIGPIPE unless MSG_NOSIGNAL.
        ctl.Send(1, 6);
        CHECK(ctl.Recv(1) == 7, "step 7");
        signal(SIGPIPE, [](int) { g_sigpipes++; });
        ssize_t n = -1;
        int64_t end = NowUs() + 3000000;
        // The close reaches us asynchronously: send until it does.
        while (NowUs() < end) {
          n = vsocket_send(fd, "z", 1, MSG_NOSIGNAL);
          if (n < 0) break;
          usleep(10000);
        }
        CHECK(n == -1 && errno == EPIPE, "EPIPE after the peer closed: %zd", n);
        CHECK(g_sigpipes == 0, "SIGPIPE despite MSG_NOSIGNAL");
        CHECK(vsocket_send(fd, "z", 1, 0) == -1 && errno == EPIPE, "EPIPE 2");
        CHECK(g_sigpipes == 1, "no SIGPIPE without MSG_NOSIGNAL");
        vsocket_close(fd);
      });
}

// --- fork: the child's copy is unusable, the parent keeps working ----------
int Fork() {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        // A process that forks stops offering RDMA on its listeners (a
        // pre-fork server's children could not claim the channels).
        pid_t helper = fork();
        if (helper == 0) _exit(0);
        waitpid(helper, nullptr, 0);
        char buf[64];
        ssize_t n;
        while ((n = vsocket_recv(fd, buf, sizeof(buf), 0)) > 0) SendAll(fd, buf, n);
        CHECK(n == 0, "server: EOF expected, got %zd", n);
        vsocket_close(fd);
        fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "tcp", "after fork: %s", Name(fd).c_str());
        while ((n = vsocket_recv(fd, buf, sizeof(buf), 0)) > 0) SendAll(fd, buf, n);
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port = ctl.Recv(1);
        int fd = Connect(port);
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        int go[2], ready[2];
        CHECK(pipe(go) == 0 && pipe(ready) == 0, "pipe");
        pid_t child = fork();
        if (child == 0) {
          g_role = "forked-child";
          char c;
          CHECK(vsocket_recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == ECONNRESET,
                "the child's copy must report ECONNRESET");
          CHECK(vsocket_send(fd, "c", 1, MSG_NOSIGNAL) == -1 && errno == ECONNRESET,
                "the child's copy must not send");
          CHECK(write(ready[1], "r", 1) == 1, "ready");
          CHECK(read(go[0], &c, 1) == 1, "go");
          vsocket_close(fd);  // must not end the parent's connection
          _exit(0);
        }
        auto echo = [&](int from, int to) {
          for (int i = from; i < to; ++i) {
            char msg[32], back[32];
            int len = snprintf(msg, sizeof(msg), "msg %d", i);
            SendAll(fd, msg, len);
            CHECK(vsocket_recv(fd, back, len, MSG_WAITALL) == len &&
                      !memcmp(msg, back, len), "echo %d after fork", i);
          }
        };
        char c;
        CHECK(read(ready[0], &c, 1) == 1, "child ready");
        echo(0, 50);  // the child still holds its copy
        CHECK(write(go[1], "g", 1) == 1, "go");
        int st = 0;
        waitpid(child, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child failed");
        echo(50, 100);  // the child closed its copy and exited
        vsocket_close(fd);
        // The server forked after its accept: its listener no longer offers
        // RDMA, and the CM rejects us at once.
        int64_t us = 0;
        fd = Connect(port, &us);
        printf("  fork: connect after the server forked: %s (%s) in %lld us\n",
               Name(fd).c_str(), Reason(fd).c_str(), (long long)us);
        CHECK(Name(fd) == "tcp" && Reason(fd) == "peer_not_vsocket",
              "after the server forked: %s %s", Name(fd).c_str(), Reason(fd).c_str());
        SendAll(fd, "tcp!", 4);
        char back[4];
        CHECK(vsocket_recv(fd, back, 4, MSG_WAITALL) == 4 && !memcmp(back, "tcp!", 4),
              "echo over tcp");
        vsocket_close(fd);
      });
}

// --- stats: registered memory is reported and bounded ----------------------
// Both paths, each pinned (VSOCKET_RDMA_LINKS), whatever the default:
//  - stats (links): a connection's ring is VSOCKET_RDMA_RING_SIZE while the
//    process's registered bytes stay under half the limit, then 64 KiB
//    (rdma_backend/README.md "Memory"); the mirror is the peer's ring (the
//    server's limit is the default: 512 KiB).  With a 3 MiB limit: 512+512
//    KiB, then twice 64+512 KiB (2,228,224 bytes); the fourth connection
//    would pass the limit: TCP, rdma_memory_limit.
//  - stats_per_connection: every connection registers 512 KiB + 512 KiB:
//    three fit in 3 MiB, the fourth not.
int StatsWith(const char* links) {
  const bool on_links = std::string(links) == "1";
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_RDMA_LINKS", links, 1);
        setenv("VSOCKET_RDMA_RING_SIZE", "512K", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        std::vector<int> fds;
        for (int i = 0; i < 4; ++i) {
          int fd = vsocket_accept(lfd, nullptr, nullptr);
          CHECK(fd >= 0, "accept");
          fds.push_back(fd);
        }
        CHECK(ctl.Recv(0) == 1, "done");
        for (int fd : fds) vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_RDMA_LINKS", links, 1);
        setenv("VSOCKET_RDMA_RING_SIZE", "512K", 1);
        setenv("VSOCKET_RDMA_MAX_REGISTERED_MB", "3", 1);
        int port = ctl.Recv(1);
        int a = Connect(port), b = Connect(port), d = Connect(port);
        int c = Connect(port);
        printf("  stats (links %s): %s %s %s %s(%s)\n", links, Name(a).c_str(),
               Name(b).c_str(), Name(d).c_str(), Name(c).c_str(), Reason(c).c_str());
        CHECK(Name(a) == "rdma" && Name(b) == "rdma" && Name(d) == "rdma",
              "first three on rdma");
        CHECK(Name(c) == "tcp" && Reason(c) == "rdma_memory_limit",
              "fourth: %s %s", Name(c).c_str(), Reason(c).c_str());
        char json[2048];
        vsocket_stats_json(json, sizeof(json));
        printf("  stats: %s\n", json);
        CHECK(strstr(json, "\"rdma_memory_limit\":1") != nullptr, "reason counted");
        CHECK(strstr(json, "\"limit_bytes\":3145728") != nullptr, "limit shown");
        CHECK(strstr(json, "\"max_per_connection_bytes\":1048576") != nullptr,
              "per-connection bytes");
        unsigned long long bytes = 0;
        const char* p = strstr(json, "\"rdma_registered\":{\"bytes\":");
        CHECK(p && sscanf(p, "\"rdma_registered\":{\"bytes\":%llu", &bytes) == 1, "bytes");
        const unsigned long long want =
            on_links ? 1048576ull + 2 * (65536ull + 524288ull) : 3 * 1048576ull;
        CHECK(bytes == want, "registered %llu, want %llu", bytes, want);
        // One link (one QP: the default VSOCKET_RDMA_QPS_PER_LINK) carries
        // the three, or none is made.
        CHECK((strstr(json, "\"links\":1,\"link_qps\":") != nullptr) == on_links,
              "links shown: %s", json);
        ctl.Send(1, 1);
        vsocket_close(a);
        vsocket_close(b);
        vsocket_close(c);
        vsocket_close(d);
      });
}
int Stats() { return StatsWith("1"); }
int StatsPerConnection() { return StatsWith("0"); }

// --- waiters: EINTR for a blocked recv; two threads blocked on one socket --
int Waiters() {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        CHECK(ctl.Recv(0) == 1, "step 1");  // both client threads are blocked
        usleep(200000);
        SendAll(fd, "xy", 2);
        CHECK(ctl.Recv(0) == 2, "done");
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        // A signal without SA_RESTART interrupts a blocked recv: EINTR.
        struct sigaction sa = {};
        sa.sa_handler = [](int) {};
        sigaction(SIGALRM, &sa, nullptr);  // no SA_RESTART
        struct itimerval it = {};
        it.it_value.tv_usec = 200000;
        setitimer(ITIMER_REAL, &it, nullptr);
        char c;
        int64_t t0 = NowUs();
        ssize_t n = vsocket_recv(fd, &c, 1, 0);
        CHECK(n == -1 && errno == EINTR, "recv after SIGALRM: %zd", n);
        printf("  waiters: EINTR after %lld us\n", (long long)(NowUs() - t0));
        // Two threads block in recv on the same socket; two bytes wake both.
        char got[2] = {0, 0};
        std::atomic<int> done{0};
        std::thread a([&] {
          if (vsocket_recv(fd, &got[0], 1, 0) == 1) done++;
        });
        std::thread b([&] {
          if (vsocket_recv(fd, &got[1], 1, 0) == 1) done++;
        });
        usleep(100000);
        ctl.Send(1, 1);
        a.join();
        b.join();
        CHECK(done == 2, "both waiters must get a byte (%d)", done.load());
        CHECK((got[0] == 'x' && got[1] == 'y') || (got[0] == 'y' && got[1] == 'x'),
              "bytes %c%c", got[0], got[1]);
        ctl.Send(1, 2);
        vsocket_close(fd);
      });
}

// --- concurrent_connects: threads of one process connect at once ----------
// What python3 in preload_apps.sh does, at a larger scale: every connection
// must be on RDMA at both ends, its echo intact.  (CI's stop 27 failed
// there: a thread read another's raised RLIMIT_NOFILE, its setup failed
// after the server had paired, and it wrote to TCP while the server read
// RDMA.  That race is rare at this rate, so this scenario passes on the old
// code too; tests/unit/private_fd_test.cc reproduces the race, and the
// setup now cannot fail after the SYN at all.)
int ConcurrentConnects() {
  constexpr int kThreads = 8, kPerThread = 8, kConns = kThreads * kPerThread;
  constexpr size_t kBytes = 64 << 10;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        std::atomic<int> not_rdma{0};
        std::vector<std::thread> echoes;
        for (int i = 0; i < kConns; ++i) {
          int fd = vsocket_accept(lfd, nullptr, nullptr);
          CHECK(fd >= 0, "accept %d", i);
          if (Name(fd) != "rdma") {
            fprintf(stderr, "  server connection %d: %s (%s)\n", i,
                    Name(fd).c_str(), Reason(fd).c_str());
            not_rdma++;
          }
          echoes.emplace_back([fd] {
            std::vector<char> buf(16 << 10);
            for (;;) {
              ssize_t n = vsocket_recv(fd, buf.data(), buf.size(), 0);
              if (n <= 0) break;
              SendAll(fd, buf.data(), static_cast<size_t>(n));
            }
            vsocket_close(fd);
          });
        }
        for (auto& t : echoes) t.join();
        CHECK(not_rdma == 0, "%d server connections not on rdma", not_rdma.load());
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        // The probe's deadline is 3 s, as in the soak (soak_test.cc): with
        // the host loaded, one of 64 simultaneous probes of the emulated
        // guest took longer than the default 300 ms, and the negative
        // answer it left sent every later connection to TCP (59 of 64 in
        // the issue 30 hunt).  This checks concurrency, not probe speed.
        setenv("VSOCKET_RDMA_PROBE_MS", "3000", 1);
        const int port = ctl.Recv(1);
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            std::vector<uint8_t> out(kBytes), in(kBytes);
            for (int i = 0; i < kPerThread; ++i) {
              int fd = Connect(port);
              if (Name(fd) != "rdma") {
                fprintf(stderr, "  client %d/%d: %s (%s)\n", t, i,
                        Name(fd).c_str(), Reason(fd).c_str());
                failures++;
              }
              FillPattern(t * 100 + i, 0, out.data(), kBytes);
              SendAll(fd, out.data(), kBytes);
              size_t got = 0;
              while (got < kBytes) {
                ssize_t n = vsocket_recv(fd, in.data() + got, kBytes - got, 0);
                if (n <= 0) break;
                got += static_cast<size_t>(n);
              }
              if (got != kBytes || in != out) {
                fprintf(stderr, "  client %d/%d: %zu of %zu bytes echoed%s\n", t, i,
                        got, kBytes, got == kBytes ? ", corrupt" : "");
                failures++;
              }
              vsocket_close(fd);
            }
          });
        }
        for (auto& t : threads) t.join();
        CHECK(failures == 0, "%d client connections failed", failures.load());
        printf("  concurrent_connects: %d connections from %d threads, all rdma, "
               "echoes intact\n", kConns, kThreads);
      });
}

// --- pingpong: 64-byte round trips through the API (latency figures) ------
int PingPongWithSpin(const char* spin_us) {
  constexpr int kRounds = 1000;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", spin_us, 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        char buf[64];
        for (int i = 0; i < kRounds; ++i) {
          CHECK(vsocket_recv(fd, buf, 64, MSG_WAITALL) == 64, "server recv %d", i);
          SendAll(fd, buf, 64);
        }
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", spin_us, 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        std::vector<int64_t> rtt;
        char msg[64], back[64];
        for (int i = 0; i < kRounds; ++i) {
          memset(msg, 'a' + i % 26, sizeof(msg));
          int64_t t0 = NowUs();
          SendAll(fd, msg, 64);
          CHECK(vsocket_recv(fd, back, 64, MSG_WAITALL) == 64 &&
                    !memcmp(msg, back, 64), "echo %d", i);
          rtt.push_back(NowUs() - t0);
        }
        std::sort(rtt.begin(), rtt.end());
        printf("  pingpong (VSOCKET_SPIN_US=%s): 64 B x %d: RTT p50 %lld us, "
               "p90 %lld us, p99 %lld us\n", spin_us, kRounds,
               (long long)rtt[rtt.size() / 2], (long long)rtt[rtt.size() * 9 / 10],
               (long long)rtt[rtt.size() * 99 / 100]);
        vsocket_close(fd);
      });
}

int PingPong() {
  // The default spin (200 us); 2 ms (longer than a TCG guest's wake-up, as
  // rdma_channel_test's "spin budget 2 ms"); and no spin: every wait sleeps
  // in poll() and is woken by a completion.
  return PingPongWithSpin("200") | PingPongWithSpin("2000") |
         PingPongWithSpin("0");
}

// --- spin_then_sleep: a blocking call whose spin found its data leaves the
// CQ unarmed (deferred arming); an application that then sleeps in the
// kernel's poll()/epoll_wait() on the descriptor must still be woken by the
// next message.  Rounds of: a spinning ping-pong, then one message sent
// 50 ms later while the client sleeps in the kernel's poll(), in
// vsocket_poll() or in the kernel's epoll_wait(), in turn.
int SpinThenSleep() {
  constexpr int kRounds = 9, kPings = 50;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", "2000", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        char buf[64];
        for (int r = 0; r < kRounds; ++r) {
          for (int i = 0; i < kPings; ++i) {
            CHECK(vsocket_recv(fd, buf, 64, MSG_WAITALL) == 64, "server recv");
            SendAll(fd, buf, 64);
          }
          usleep(50000);  // the client is asleep in the kernel by now
          SendAll(fd, "w", 1);
        }
        CHECK(vsocket_recv(fd, buf, 1, 0) == 0, "end of stream");
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", "2000", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        int ep = epoll_create1(0);
        struct epoll_event ev = {};
        ev.events = EPOLLIN;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl");
        char msg[64], back[64];
        int64_t worst_us = 0;
        for (int r = 0; r < kRounds; ++r) {
          for (int i = 0; i < kPings; ++i) {
            memset(msg, 'a' + i % 26, sizeof(msg));
            SendAll(fd, msg, 64);
            CHECK(vsocket_recv(fd, back, 64, MSG_WAITALL) == 64 &&
                      !memcmp(msg, back, 64), "echo %d/%d", r, i);
          }
          int64_t t0 = NowUs();
          if (r % 3 == 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            CHECK(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN),
                  "round %d: kernel poll() not woken by the next message", r);
          } else if (r % 3 == 1) {
            struct pollfd pfd = {fd, POLLIN, 0};  // arms deferred CQs first
            CHECK(vsocket_poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN),
                  "round %d: vsocket_poll() not woken by the next message", r);
          } else {
            CHECK(epoll_wait(ep, &ev, 1, 5000) == 1,
                  "round %d: epoll_wait() not woken by the next message", r);
          }
          worst_us = std::max(worst_us, NowUs() - t0);
          char w;
          CHECK(vsocket_recv(fd, &w, 1, MSG_DONTWAIT) == 1 && w == 'w', "wake byte");
        }
        printf("  spin_then_sleep: %d rounds, poll/vsocket_poll/epoll woken after "
               "at most %lld us (the message was sent ~50000 us in)\n",
               kRounds, (long long)worst_us);
        close(ep);
        vsocket_close(fd);
      });
}

// The voluntary context switches of this process's RDMA progress thread
// (named "vsocket-rdma"): one per wake-up.  -1 when there is none.
long ProgressThreadWakeups() {
  char path[512];
  std::string base = "/proc/" + std::to_string(getpid()) + "/task";
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(base.c_str()), closedir);
  if (!d) return -1;
  while (struct dirent* e = readdir(d.get())) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s/comm", base.c_str(), e->d_name);
    char comm[64] = {};
    FILE* f = fopen(path, "r");
    if (!f) continue;
    bool ours = fgets(comm, sizeof(comm), f) && strncmp(comm, "vsocket-rdma", 12) == 0;
    fclose(f);
    if (!ours) continue;
    snprintf(path, sizeof(path), "%s/%s/status", base.c_str(), e->d_name);
    f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long n = -1;
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) break;
    fclose(f);
    return n;
  }
  return -1;
}

// --- user_space_poll: vsocket_poll reads the completion queue itself and
// holds the connection while it spins, so an answer that lands during the
// spin costs no progress-thread wake-up (the CQ stays unarmed) and raises
// the descriptor at most once; a hold nobody looks after ends by itself,
// so a later sleep in the kernel's own poll() is still woken.  Pinned to
// the per-connection path (VSOCKET_RDMA_LINKS=0): over a link the progress
// thread arms the link's CQ at each wake-up (per-link deferred arming is
// not built, rdma_backend/README.md "Links"), so each completion may wake
// it -- 409 and 751 wake-ups for the 400 rounds in two runs with links. --
int UserSpacePoll() {
  constexpr int kRounds = 400;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", "20000", 1);
        setenv("VSOCKET_RDMA_LINKS", "0", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int fd = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(fd >= 0 && Name(fd) == "rdma", "accept");
        char buf[64];
        for (int i = 0; i < kRounds; ++i) {
          CHECK(vsocket_recv(fd, buf, 64, MSG_WAITALL) == 64, "server recv %d", i);
          SendAll(fd, buf, 64);
        }
        usleep(50000);  // the client's hold has expired; it sleeps in poll()
        SendAll(fd, "w", 1);
        CHECK(vsocket_recv(fd, buf, 1, 0) == 0, "end of stream");
        vsocket_close(fd);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_SPIN_US", "20000", 1);
        setenv("VSOCKET_RDMA_LINKS", "0", 1);
        int fd = Connect(ctl.Recv(1));
        CHECK(Name(fd) == "rdma", "transport %s", Name(fd).c_str());
        CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0, "nonblock");
        char msg[64], back[64];
        long wakeups_before = ProgressThreadWakeups();
        for (int i = 0; i < 200 && wakeups_before < 0; ++i) {
          usleep(10000);  // the thread names itself when it starts
          wakeups_before = ProgressThreadWakeups();
        }
        CHECK(wakeups_before >= 0, "no vsocket-rdma thread found");
        int64_t t0 = NowUs();
        for (int i = 0; i < kRounds; ++i) {
          memset(msg, 'a' + i % 26, sizeof(msg));
          SendAll(fd, msg, 64);
          struct pollfd pfd = {fd, POLLIN, 0};
          CHECK(vsocket_poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN),
                "round %d: vsocket_poll", i);
          CHECK(vsocket_recv(fd, back, 64, MSG_WAITALL) == 64 &&
                    !memcmp(msg, back, 64), "echo %d", i);
        }
        int64_t took_us = NowUs() - t0;
        long wakeups = ProgressThreadWakeups() - wakeups_before;
        // Its 2 ms check of the held connection should be all that wakes
        // it. The bound tests the claim "not once per message" (>= kRounds):
        // the checks plus half a wake-up per round. In the 2-vCPU guest a
        // spinning client loses its CPU now and then, its hold lapses and
        // the CQ is armed, so a few answers do wake the thread (76 and 116
        // of 400 seen in CI, against 57 for the checks alone).
        long allowed = 10 + took_us / 1000 + kRounds / 2;
        printf("  user_space_poll: %d round trips through vsocket_poll in "
               "%lld us; the progress thread woke %ld times (at most %ld "
               "allowed: its checks and half a wake-up per round)\n",
               kRounds, (long long)took_us, wakeups, allowed);
        CHECK(wakeups <= allowed,
              "the progress thread was woken per message (%ld for %d)",
              wakeups, kRounds);
        // Nobody looks any more: the hold must end, so the kernel's poll()
        // sees the next message.
        usleep(10000);
        struct pollfd pfd = {fd, POLLIN, 0};
        CHECK(poll(&pfd, 1, 0) == 0,
              "descriptor readable with nothing to read after the hold ended");
        t0 = NowUs();
        CHECK(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN),
              "kernel poll() after the poller left was not woken");
        printf("  user_space_poll: the kernel's poll() woke after %lld us "
               "(the message was sent ~40000 us in)\n",
               (long long)(NowUs() - t0));
        char w;
        CHECK(vsocket_recv(fd, &w, 1, 0) == 1 && w == 'w', "wake byte");
        vsocket_close(fd);
      });
}

constexpr Scenario kScenarios[] = {
    {"readiness", Readiness}, {"plain_server", PlainServer},
    {"tcp_policy", TcpPolicy}, {"kill", Kill}, {"fork", Fork},
    {"stats", Stats}, {"stats_per_connection", StatsPerConnection},
    {"waiters", Waiters}, {"pingpong", PingPong},
    {"concurrent_connects", ConcurrentConnects},
    {"spin_then_sleep", SpinThenSleep}, {"user_space_poll", UserSpacePoll},
    {"integrity", Integrity}, {"late_accept", LateAccept}};

}  // namespace

int main(int argc, char** argv) {
  return RunScenarios(argc, argv, kScenarios);
}
