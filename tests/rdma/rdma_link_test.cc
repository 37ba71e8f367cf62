// RdmaLink on real RDMA (Soft-RoCE in the guest; exits 77 without a
// device): many connections between two processes over ONE link, and a
// killed client process among several.  rdma_backend/README.md "Links".
//
//   many  VSOCKET_LINK_TEST_CONNS (default 1000) connections opened over one
//         link (VSOCKET_RDMA_QPS_PER_LINK QPs, default 1): the QPs the
//         processes hold (the link's count, and `rdma res show qp` when
//         the tool exists), registrations made, the open rate against
//         kernel TCP connects in the same guest; every connection carries
//         a distinct message each way, checked byte by byte; all closed,
//         every slot freed on both sides.
//   kill  three client processes, a link and 10 connections each; SIGKILL
//         of one: the server sees all 10 of its connections reset within
//         1 s, the other two links stay alive and carry checked data.
//   channels  RdmaChannels over one link: VSOCKET_LINK_TEST_CHANNELS
//         (default 100) streams larger than their 64 KiB rings echoed and
//         checked, end of stream both ways, every slot freed after Close.
//   corrupt  an immediate for a slot the server never opened, on one of a
//         client's two links: that link dies (its connections reset), the
//         other carries checked data.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/rdma_link.h"
#include "scenario_harness.h"

namespace {

using namespace vsocket_rdma_test;
using vsocket_test::NowNs;
using vsocket::rdma::ChannelOptions;
using vsocket::rdma::LinkConnection;
using vsocket::rdma::RdmaChannel;
using vsocket::rdma::WaitOptions;
using vsocket::rdma::LinkListener;
using vsocket::rdma::LinkOptions;
using vsocket::rdma::OpenRequest;
using vsocket::rdma::RdmaLink;
using vsocket::rdma::SlotEvent;
using vsocket::rdma::kImmControl;
using vsocket::rdma::kImmData;

constexpr uint32_t kRing = 16 * 1024;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

LinkOptions Options() {
  LinkOptions o;
  o.qps = static_cast<uint8_t>(EnvInt("VSOCKET_RDMA_QPS_PER_LINK", 1));
  return o;
}

// The message connection `tcp_port` carries in `direction` (0 client to
// server, 1 back): its length and bytes depend on both.
uint32_t MessageLen(uint16_t tcp_port, int direction) {
  return 1 + (tcp_port * 131u + direction * 977u) % (kRing - 1);
}
uint8_t MessageByte(uint16_t tcp_port, int direction, uint32_t i) {
  return static_cast<uint8_t>(tcp_port * 7 + direction * 13 + i * 31);
}

void SendMessage(RdmaLink& link, const LinkConnection& c, int direction) {
  uint32_t len = MessageLen(c.tcp_port, direction);
  CHECK(len <= c.peer_capacity, "message larger than the peer's ring");
  for (uint32_t i = 0; i < len; ++i) c.tx.addr[i] = MessageByte(c.tcp_port, direction, i);
  CHECK(link.PostToPeer(c, c.tx.addr, c.tx.lkey, 0, len, kImmData, len,
                        false) == 0,
        "PostToPeer (port %u)", c.tcp_port);
}

// Applies `c`'s events: returns the DATA count seen (checking the bytes
// in the receive slice), or -1 on a RESET; a CLOSE sets *closed.
int64_t TakeMessage(RdmaLink& link, const LinkConnection& c, int direction,
                    bool* closed) {
  std::vector<SlotEvent> events;
  link.TakeEvents(c, &events);
  int64_t got = 0;
  for (const SlotEvent& e : events) {
    if (e.type == kImmData) {
      uint32_t want = MessageLen(c.tcp_port, direction);
      CHECK(e.value == want, "port %u: %u bytes, want %u", c.tcp_port,
            e.value, want);
      for (uint32_t i = 0; i < want; ++i) {
        CHECK(c.rx.addr[i] == MessageByte(c.tcp_port, direction, i),
              "port %u: byte %u differs", c.tcp_port, i);
      }
      got += e.value;
    } else if (e.type == kImmControl && e.value == vsocket::rdma::link::kCtlReset) {
      return -1;
    } else if (e.type == kImmControl && e.value == vsocket::rdma::kCtlClose) {
      if (closed != nullptr) *closed = true;
    }
  }
  return got;
}

// Waits (at most 60 s) until every connection of `conns` got its message
// in `direction` (each checked by TakeMessage; a reset fails), calling
// `then` for each as it arrives.
void AwaitMessages(RdmaLink& link, const std::vector<LinkConnection>& conns,
                   int direction,
                   const std::function<void(const LinkConnection&)>& then) {
  std::vector<bool> got(conns.size(), false);
  size_t remaining = conns.size();
  int64_t deadline = NowUs() + 60'000'000;
  while (remaining > 0) {
    CHECK(NowUs() < deadline, "%zu messages missing", remaining);
    CHECK(!link.dead(), "the link died");
    link.Wait(NowNs() + 1'000'000);
    for (size_t i = 0; i < conns.size(); ++i) {
      if (got[i]) continue;
      int64_t bytes = TakeMessage(link, conns[i], direction, nullptr);
      CHECK(bytes >= 0, "connection (port %u) reset", conns[i].tcp_port);
      if (bytes > 0) {
        got[i] = true;
        --remaining;
        if (then) then(conns[i]);
      }
    }
  }
}

// Server side: answers every OPEN of `link` with a connection.
void AcceptOpens(RdmaLink& link, std::vector<LinkConnection>* conns,
                 uint32_t ring = kRing) {
  OpenRequest req;
  while (link.NextOpen(&req)) {
    LinkConnection c;
    CHECK(link.AcceptOpen(req, ring, &c) == 0, "AcceptOpen");
    conns->push_back(c);
  }
}

// RC QPs of process `pid` per `rdma res show qp`, or -1 without the tool.
int QpsOfProcess(pid_t pid) {
  FILE* f = popen("rdma res show qp 2>/dev/null", "r");
  if (f == nullptr) return -1;
  char line[512];
  int count = 0, lines = 0;
  std::string want = " pid " + std::to_string(pid) + " ";
  while (fgets(line, sizeof(line), f) != nullptr) {
    ++lines;
    std::string s(line);
    if (s.find(want) != std::string::npos && s.find("type RC") != std::string::npos) {
      ++count;
    }
  }
  int status = pclose(f);
  return (status != 0 || lines == 0) ? -1 : count;
}

// Kernel TCP connects per second to a local listener (same guest, same
// address), for comparison.  Connections are held, as the links' are (the
// descriptor limit is raised to fit them).
double TcpConnectsPerSecond(int n) {
  rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < static_cast<rlim_t>(2 * n + 64)) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 2 * n + 64);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Addr(SelfIp(), 0);
  CHECK(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "bind");
  CHECK(listen(lfd, 4096) == 0, "listen");
  socklen_t len = sizeof(a);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::vector<int> fds;
  int64_t t0 = NowUs();
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0, "connect");
    int afd = accept(lfd, nullptr, nullptr);
    CHECK(afd >= 0, "accept");
    fds.push_back(fd);
    fds.push_back(afd);
  }
  int64_t us = NowUs() - t0;
  for (int fd : fds) close(fd);
  close(lfd);
  return n * 1e6 / static_cast<double>(us > 0 ? us : 1);
}

// A link listener on the guest's address; its port goes to the client.
std::unique_ptr<LinkListener> ListenAndTell(Ctl& ctl) {
  std::string error;
  auto listener = LinkListener::Listen(Addr(SelfIp(), 0), Options(), &error);
  CHECK(listener != nullptr, "LinkListener::Listen: %s", error.c_str());
  ctl.Send(0, listener->port());
  return listener;
}

std::shared_ptr<RdmaLink> AcceptLink(LinkListener& listener) {
  std::string error;
  for (int i = 0; i < 100; ++i) {
    std::shared_ptr<RdmaLink> l = listener.Accept(100'000'000, &error);
    if (l != nullptr) return l;
    CHECK(errno == EAGAIN, "LinkListener::Accept: %s", error.c_str());
  }
  CHECK(false, "no link within 10 s");
  return nullptr;
}

int Many() {
  const int n = EnvInt("VSOCKET_LINK_TEST_CONNS", 1000);
  return RunPair(
      [n](Ctl& ctl) {
        auto listener = ListenAndTell(ctl);
        std::shared_ptr<RdmaLink> link = AcceptLink(*listener);
        std::vector<LinkConnection> conns;
        while (static_cast<int>(conns.size()) < n) {
          link->Wait(-1);
          AcceptOpens(*link, &conns);
          CHECK(!link->dead(), "link died while opening");
        }
        printf("  server: %d connections on 1 link, %u QP(s), %zu registered "
               "bytes, %llu registrations\n",
               n, link->qp_count(), link->registered_bytes(),
               static_cast<unsigned long long>(link->registrations()));
        CHECK(ctl.Recv(0) == 1, "client done opening");
        // Every connection's message arrives intact; answer each.
        AwaitMessages(*link, conns, 0, [&](const LinkConnection& c) {
          SendMessage(*link, c, 1);
        });
        int64_t deadline = NowUs() + 60'000'000;
        // The client closes every connection; we close ours in answer.
        std::vector<bool> closed(conns.size(), false);
        int remaining = n;
        while (remaining > 0) {
          CHECK(NowUs() < deadline, "%d closes missing", remaining);
          link->Wait(-1);
          for (size_t i = 0; i < conns.size(); ++i) {
            if (closed[i]) continue;
            bool c = false;
            CHECK(TakeMessage(*link, conns[i], 0, &c) >= 0, "reset at close");
            if (c) {
              closed[i] = true;
              --remaining;
              link->CloseConnection(conns[i], false);
            }
          }
        }
        while (link->slots_in_use() > 0) {
          CHECK(NowUs() < deadline, "%zu server slots not freed", link->slots_in_use());
          link->Wait(-1);
        }
        ctl.Send(0, 2);
        CHECK(ctl.Recv(0) == 3, "client finished");
      },
      [n](Ctl& ctl, pid_t server_pid) {
        int port = static_cast<int>(ctl.Recv(1));
        std::string error;
        int64_t t0 = NowUs();
        auto link = RdmaLink::Connect(Addr(SelfIp(), port), Options(), &error);
        CHECK(link != nullptr, "RdmaLink::Connect: %s", error.c_str());
        int64_t link_us = NowUs() - t0;
        std::vector<LinkConnection> conns(n);
        t0 = NowUs();
        for (int i = 0; i < n; ++i) {
          uint8_t cause = 0;
          CHECK(link->Open(static_cast<uint16_t>(i + 1), kRing,
                           NowNs() + 5'000'000'000, &conns[i], &cause) == 0,
                "Open %d: %s (cause %u)", i, strerror(errno), cause);
        }
        int64_t open_us = NowUs() - t0;
        double rdma_rate = n * 1e6 / static_cast<double>(open_us > 0 ? open_us : 1);
        // VSOCKET_LINK_TEST_TCP=0 skips the comparison (system call counts).
        double tcp_rate = EnvInt("VSOCKET_LINK_TEST_TCP", 1) != 0
                              ? TcpConnectsPerSecond(n)
                              : 0;
        int qps_tool = QpsOfProcess(getpid());
        int qps_server = QpsOfProcess(server_pid);
        printf("  link setup %lld us; %d opens in %lld us: %.0f/s; kernel TCP "
               "connect+accept in the same guest: %.0f/s (opens/TCP = %.2f)\n",
               (long long)link_us, n, (long long)open_us, rdma_rate, tcp_rate,
               rdma_rate / tcp_rate);
        printf("  client: %u QP(s) on the link; rdma res show qp: client %d, "
               "server %d RC QP(s) (-1: no rdma tool); %llu registrations, "
               "%zu registered bytes\n",
               link->qp_count(), qps_tool, qps_server,
               static_cast<unsigned long long>(link->registrations()),
               link->registered_bytes());
        CHECK(link->qp_count() == Options().qps, "QPs on the link");
        if (qps_tool >= 0) {
          CHECK(qps_tool == Options().qps, "client holds %d RC QPs", qps_tool);
        }
        if (qps_server >= 0) {
          CHECK(qps_server == Options().qps, "server holds %d RC QPs", qps_server);
        }
        // Registrations come from chunks, not connections.
        CHECK(link->registrations() * 10 < static_cast<uint64_t>(n) + 100,
              "%llu registrations for %d connections",
              static_cast<unsigned long long>(link->registrations()), n);
        ctl.Send(1, 1);
        for (int i = 0; i < n; ++i) SendMessage(*link, conns[i], 0);
        AwaitMessages(*link, conns, 1, nullptr);
        int64_t deadline = NowUs() + 60'000'000;
        for (int i = 0; i < n; ++i) link->CloseConnection(conns[i], false);
        while (link->slots_in_use() > 0) {
          CHECK(NowUs() < deadline, "%zu client slots not freed", link->slots_in_use());
          link->Wait(-1);
        }
        CHECK(ctl.Recv(1) == 2, "server freed its slots");
        printf("  %d messages each way checked; every slot freed on both sides\n", n);
        ctl.Send(1, 3);
      });
}

// One client process of the kill scenario: a link, 10 connections, then
// (told through `go_fd`) a message on each and the answers checked.
[[noreturn]] void KillClient(int port, int ready_fd, int go_fd, int index) {
  std::string error;
  auto link = RdmaLink::Connect(Addr(SelfIp(), port), Options(), &error);
  CHECK(link != nullptr, "Connect: %s", error.c_str());
  std::vector<LinkConnection> conns(10);
  for (int i = 0; i < 10; ++i) {
    uint8_t cause = 0;
    CHECK(link->Open(static_cast<uint16_t>(index * 100 + i + 1), kRing,
                     NowNs() + 5'000'000'000, &conns[i], &cause) == 0,
          "Open: %s", strerror(errno));
  }
  char b = 'r';
  CHECK(write(ready_fd, &b, 1) == 1, "ready");
  CHECK(read(go_fd, &b, 1) == 1, "go");
  for (auto& c : conns) SendMessage(*link, c, 0);
  AwaitMessages(*link, conns, 1, nullptr);
  _exit(0);
}

int Kill() {
  return RunPair(
      [](Ctl& ctl) {
        auto listener = ListenAndTell(ctl);
        std::vector<std::shared_ptr<RdmaLink>> links;
        std::vector<std::vector<LinkConnection>> conns;
        for (int i = 0; i < 3; ++i) {
          links.push_back(AcceptLink(*listener));
          conns.emplace_back();
        }
        int64_t deadline = NowUs() + 30'000'000;
        for (;;) {
          size_t total = 0;
          for (size_t i = 0; i < links.size(); ++i) {
            links[i]->Poll();
            AcceptOpens(*links[i], &conns[i]);
            total += conns[i].size();
          }
          if (total == 30) break;
          CHECK(NowUs() < deadline, "opens missing");
          usleep(1000);
        }
        ctl.Send(0, 1);  // all accepted
        CHECK(ctl.Recv(0) == 2, "kill done");
        int64_t killed_at = NowUs();
        // Exactly one link dies, with all its connections, within 1 s.
        int dead = -1;
        while (dead < 0) {
          CHECK(NowUs() - killed_at < 1'000'000, "no link died within 1 s");
          for (size_t i = 0; i < links.size(); ++i) {
            links[i]->Wait(NowNs() + 1'000'000);
            if (links[i]->dead()) dead = static_cast<int>(i);
          }
        }
        int64_t detect_us = NowUs() - killed_at;
        for (const LinkConnection& c : conns[dead]) {
          CHECK(TakeMessage(*links[dead], c, 0, nullptr) == -1,
                "a connection of the dead link was not reset");
        }
        printf("  killed client's link: 10 connections reset after %lld us\n",
               (long long)detect_us);
        ctl.Send(0, 3);
        // The other two links carry a checked message each way.
        for (int l = 0; l < 3; ++l) {
          if (l == dead) continue;
          AwaitMessages(*links[l], conns[l], 0, [&](const LinkConnection& c) {
            SendMessage(*links[l], c, 1);
          });
        }
        CHECK(ctl.Recv(0) == 4, "clients done");
      },
      [](Ctl& ctl, pid_t) {
        int port = static_cast<int>(ctl.Recv(1));
        pid_t kids[3];
        int go[3];
        int ready[2];
        CHECK(pipe(ready) == 0, "pipe");
        for (int i = 0; i < 3; ++i) {
          int p[2];
          CHECK(pipe(p) == 0, "pipe");
          kids[i] = fork();
          CHECK(kids[i] >= 0, "fork");
          if (kids[i] == 0) KillClient(port, ready[1], p[0], i);
          go[i] = p[1];
        }
        for (int i = 0; i < 3; ++i) {
          char b;
          CHECK(read(ready[0], &b, 1) == 1, "a client never got ready");
        }
        CHECK(ctl.Recv(1) == 1, "server accepted all");
        kill(kids[0], SIGKILL);
        int status;
        waitpid(kids[0], &status, 0);
        ctl.Send(1, 2);
        CHECK(ctl.Recv(1) == 3, "server saw the death");
        for (int i = 1; i < 3; ++i) {
          char b = 'g';
          CHECK(write(go[i], &b, 1) == 1, "go");
        }
        for (int i = 1; i < 3; ++i) {
          CHECK(waitpid(kids[i], &status, 0) == kids[i] && WIFEXITED(status) &&
                    WEXITSTATUS(status) == 0,
                "surviving client %d failed (status %#x)", i, status);
        }
        ctl.Send(1, 4);
      });
}

// An immediate no vsocket peer sends (for a slot the server never opened)
// on one of a client's two links: that link dies with its connections,
// the other carries checked data both ways.
int Corrupt() {
  return RunPair(
      [](Ctl& ctl) {
        auto listener = ListenAndTell(ctl);
        std::shared_ptr<RdmaLink> links[2];
        std::vector<LinkConnection> conns[2];
        for (int i = 0; i < 2; ++i) {
          links[i] = AcceptLink(*listener);
          int64_t deadline = NowUs() + 10'000'000;
          while (conns[i].size() < 2) {
            CHECK(NowUs() < deadline, "opens missing");
            links[i]->Wait(NowNs() + 1'000'000);
            AcceptOpens(*links[i], &conns[i]);
          }
          ctl.Send(0, 1);
        }
        int64_t deadline = NowUs() + 1'000'000;
        while (!links[0]->dead()) {
          CHECK(NowUs() < deadline, "the corrupt link still lives after 1 s");
          links[0]->Wait(NowNs() + 1'000'000);
        }
        for (const LinkConnection& c : conns[0]) {
          CHECK(TakeMessage(*links[0], c, 0, nullptr) == -1,
                "a connection of the corrupt link was not reset");
        }
        CHECK(!links[1]->dead(), "the other link died");
        AwaitMessages(*links[1], conns[1], 0, [&](const LinkConnection& c) {
          SendMessage(*links[1], c, 1);
        });
        printf("  corrupt immediate: that link's connections reset, the "
               "other link's carried data\n");
        CHECK(ctl.Recv(0) == 2, "client done");
      },
      [](Ctl& ctl, pid_t) {
        int port = static_cast<int>(ctl.Recv(1));
        std::string error;
        std::shared_ptr<RdmaLink> links[2];
        std::vector<LinkConnection> conns[2];
        for (int i = 0; i < 2; ++i) {
          links[i] = RdmaLink::Connect(Addr(SelfIp(), port), Options(), &error);
          CHECK(links[i] != nullptr, "Connect: %s", error.c_str());
          conns[i].resize(2);
          for (int j = 0; j < 2; ++j) {
            uint8_t cause = 0;
            CHECK(links[i]->Open(static_cast<uint16_t>(i * 10 + j + 1), kRing,
                                 NowNs() + 5'000'000'000, &conns[i][j],
                                 &cause) == 0,
                  "Open: %s", strerror(errno));
          }
          CHECK(ctl.Recv(1) == 1, "server accepted");
        }
        LinkConnection forged = conns[0][0];
        forged.peer_slot = 4000;  // never opened on the server
        CHECK(links[0]->PostToPeer(forged, nullptr, 0, 0, 0, kImmData, 1,
                                   false) == 0,
              "post the corrupt immediate");
        for (auto& c : conns[1]) SendMessage(*links[1], c, 0);
        AwaitMessages(*links[1], conns[1], 1, nullptr);
        ctl.Send(1, 2);
      });
}

// RdmaChannels over one link: VSOCKET_LINK_TEST_CHANNELS (default 100)
// byte streams, each larger than its 64 KiB ring (wraps, credits, writes
// split at the immediate's count), echoed by the server and checked byte
// by byte, with end of stream both ways; then every slot freed.
constexpr uint32_t kChannelRing = 64 * 1024;

uint64_t StreamLen(size_t i) { return 150 * 1024 + i * 977; }
uint8_t StreamByte(size_t i, uint64_t off) {
  return static_cast<uint8_t>((off * 2654435761u) >> 13 ^ i);
}

ChannelOptions LinkChannelOptions() {
  ChannelOptions o;
  o.spin_ns = 0;
  return o;
}

int Channels() {
  const int n = EnvInt("VSOCKET_LINK_TEST_CHANNELS", 100);
  return RunPair(
      [n](Ctl& ctl) {
        auto listener = ListenAndTell(ctl);
        std::shared_ptr<RdmaLink> link = AcceptLink(*listener);
        std::vector<LinkConnection> conns;
        int64_t deadline = NowUs() + 60'000'000;
        while (static_cast<int>(conns.size()) < n) {
          CHECK(NowUs() < deadline, "opens missing");
          link->Wait(NowNs() + 1'000'000);
          AcceptOpens(*link, &conns, kChannelRing);
        }
        std::vector<std::unique_ptr<RdmaChannel>> chans;
        for (const LinkConnection& c : conns) {
          chans.push_back(RdmaChannel::OnLink(link, c, link->pool(),
                                              LinkChannelOptions()));
        }
        // Echo: whatever arrives goes back; end of stream is passed on.
        std::vector<std::vector<uint8_t>> pending(n);
        std::vector<bool> eof(n, false), shut(n, false);
        int open = n;
        WaitOptions now{0, 0};
        uint8_t buf[32768];
        while (open > 0) {
          CHECK(NowUs() < deadline, "%d echoes unfinished", open);
          bool any = false;
          for (int i = 0; i < n; ++i) {
            if (shut[i]) continue;
            RdmaChannel& ch = *chans[i];
            if (!eof[i] && pending[i].size() < 256 * 1024) {
              ssize_t r = ch.Recv(buf, sizeof(buf), now);
              if (r > 0) {
                pending[i].insert(pending[i].end(), buf, buf + r);
                any = true;
              } else if (r == 0) {
                eof[i] = true;
              } else {
                CHECK(errno == EAGAIN, "server recv: %s", strerror(errno));
              }
            }
            if (!pending[i].empty()) {
              ssize_t w = ch.Send(pending[i].data(), pending[i].size(), now);
              if (w > 0) {
                pending[i].erase(pending[i].begin(), pending[i].begin() + w);
                any = true;
              } else {
                CHECK(errno == EAGAIN, "server send: %s", strerror(errno));
              }
            }
            if (eof[i] && pending[i].empty()) {
              CHECK(ch.ShutdownWrite() == 0, "shutdown");
              shut[i] = true;
              --open;
            }
          }
          if (!any) link->Wait(NowNs() + 1'000'000);
        }
        CHECK(ctl.Recv(0) == 1, "client checked");
        chans.clear();  // Close(): the last messages
        while (link->slots_in_use() > 0) {
          CHECK(NowUs() < deadline, "%zu server slots not freed", link->slots_in_use());
          link->Wait(NowNs() + 1'000'000);
        }
        ctl.Send(0, 2);
      },
      [n](Ctl& ctl, pid_t) {
        int port = static_cast<int>(ctl.Recv(1));
        std::string error;
        auto link = RdmaLink::Connect(Addr(SelfIp(), port), Options(), &error);
        CHECK(link != nullptr, "Connect: %s", error.c_str());
        std::vector<std::unique_ptr<RdmaChannel>> chans;
        int64_t open_t0 = NowUs();
        for (int i = 0; i < n; ++i) {
          LinkConnection c;
          uint8_t cause = 0;
          CHECK(link->Open(static_cast<uint16_t>(i + 1), kChannelRing,
                           NowNs() + 5'000'000'000, &c, &cause) == 0,
                "Open %d: %s", i, strerror(errno));
          chans.push_back(RdmaChannel::OnLink(link, c, link->pool(),
                                              LinkChannelOptions()));
        }
        printf("  %d channels opened in %lld ms\n", n,
               (long long)((NowUs() - open_t0) / 1000));
        std::vector<uint64_t> sent(n, 0), got(n, 0);
        std::vector<bool> shut(n, false), eof(n, false);
        int unfinished = n;
        WaitOptions now{0, 0};
        uint8_t buf[32768];
        int64_t t0 = NowUs(), deadline = t0 + 120'000'000;
        uint64_t total = 0;
        while (unfinished > 0) {
          CHECK(NowUs() < deadline, "%d streams unfinished", unfinished);
          bool any = false;
          for (int i = 0; i < n; ++i) {
            if (eof[i]) continue;
            RdmaChannel& ch = *chans[i];
            uint64_t len = StreamLen(i);
            if (sent[i] < len) {
              size_t chunk = std::min<uint64_t>(sizeof(buf), len - sent[i]);
              for (size_t k = 0; k < chunk; ++k) buf[k] = StreamByte(i, sent[i] + k);
              ssize_t w = ch.Send(buf, chunk, now);
              if (w > 0) {
                sent[i] += w;
                any = true;
              } else {
                CHECK(errno == EAGAIN, "client send: %s", strerror(errno));
              }
            } else if (!shut[i]) {
              CHECK(ch.ShutdownWrite() == 0, "shutdown");
              shut[i] = true;
            }
            ssize_t r = ch.Recv(buf, sizeof(buf), now);
            if (r > 0) {
              for (ssize_t k = 0; k < r; ++k) {
                CHECK(buf[k] == StreamByte(i, got[i] + k),
                      "stream %d: byte %llu differs", i,
                      static_cast<unsigned long long>(got[i] + k));
              }
              got[i] += r;
              total += r;
              any = true;
            } else if (r == 0) {
              CHECK(got[i] == len, "stream %d: end after %llu of %llu bytes", i,
                    static_cast<unsigned long long>(got[i]),
                    static_cast<unsigned long long>(len));
              eof[i] = true;
              --unfinished;
            } else {
              CHECK(errno == EAGAIN, "client recv: %s", strerror(errno));
            }
          }
          if (!any) link->Wait(NowNs() + 1'000'000);
        }
        int64_t us = NowUs() - t0;
        printf("  %d channels over 1 link: %llu bytes echoed and checked in "
               "%lld ms (%.1f MB/s each way), end of stream both ways\n",
               n, static_cast<unsigned long long>(total), (long long)(us / 1000),
               total / static_cast<double>(us > 0 ? us : 1));
        ctl.Send(1, 1);
        int64_t close_t0 = NowUs();
        chans.clear();
        printf("  %d channels closed in %lld ms\n", n,
               (long long)((NowUs() - close_t0) / 1000));
        CHECK(ctl.Recv(1) == 2, "server freed its slots");
        printf("  server freed its slots %lld ms after the first close\n",
               (long long)((NowUs() - close_t0) / 1000));
        int64_t free_deadline = NowUs() + 10'000'000;
        while (link->slots_in_use() > 0) {
          CHECK(NowUs() < free_deadline, "%zu client slots not freed", link->slots_in_use());
          link->Wait(NowNs() + 1'000'000);
        }
      });
}

constexpr Scenario kScenarios[] = {{"many", Many}, {"kill", Kill}, {"corrupt", Corrupt}, {"channels", Channels}};

}  // namespace

int main(int argc, char** argv) {
  return RunScenarios(argc, argv, kScenarios, 240);
}
