// A hostile RDMA peer against a vsocket server, in one Soft-RoCE guest
// (tests/rdma/run-suite.sh; docs/ROBUSTNESS.md).  The RDMA counterpart of
// tests/integration/hostile_peer_test.cc (shared memory).
//
// Each scenario forks a victim (the "server": a vsocket listener with
// VSOCKET_TRANSPORT=rdma, i.e. the code a preloaded server runs) and a
// hostile peer (the "client").  The peer opens two connections:
//   A  made by hand the way a vsocket client makes one (bind, the RDMA CM
//      probe with a hello naming its TCP port, kernel connect), so that it
//      holds A's RdmaChannel and can post work requests vsocket never posts;
//   B  an ordinary vsocket connection.
// After one honest message on A, the peer attacks A.  The victim must
//   - see ECONNRESET or EOF on A within 1 s (never a crash or a hang), or,
//     for attacks that are legal traffic (a flood of no-op immediates),
//     keep A working;
//   - keep echoing on B.
// What the peer learns is checked too: a write outside the victim's receive
// ring (its control block, or past its end) must be refused by the NIC.
//
// The link_* scenarios attack a victim's link instead (VSOCKET_RDMA_LINKS=1
// on both sides; rdma_backend/README.md "Validation").  The peer makes a
// link by hand (RdmaLink::Connect) and opens two connections on it, A and
// A2, the way a vsocket client does (OPEN naming a bound TCP port, then the
// kernel connect); B is an ordinary vsocket connection, which the peer's
// registry carries on a link of its own.  Then it attacks:
//   link_slot_not_open   an immediate for a slot the victim never opened
//   link_control_unknown a control message (SEND) with an unknown op
//     -> the link cannot be trusted: A and A2 end (ECONNRESET or EOF)
//        within 1 s; B, another link, keeps echoing;
//   link_data_overflow   DATA beyond the space A's credits granted
//   link_credit_unsent   a CREDIT for bytes the victim never sent on A
//     -> A's fault only: A ends within 1 s, A2 (same link) still carries a
//        message each way, B keeps echoing.
// The link layer alone (no sockets) has its own cases in rdma_link_test
// (corrupt: an immediate for an unopened slot kills that link, another
// link of the same client carries data; kill: a dead client's connections
// reset within 1 s, other clients' links carry data).
//
//   rdma_hostile_peer_test              every scenario
//   rdma_hostile_peer_test NAME...      some of them
//
// Exits 77 (ctest SKIP) without an RDMA device.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/rdma_link.h"
#include "rdma_backend/rdma_negotiation.h"
#include "rdma_backend/wire_format.h"
#include "exact_io.h"
#include "scenario_harness.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/vsocket.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {

// The hostile peer's hands on its own channel: the work requests a vsocket
// channel would never post.  Friend of RdmaChannel (tests only).
class RdmaChannelTestPeer {
 public:
  // Posts a zero-length RDMA WRITE WITH IMM carrying `imm` (host order),
  // signalled, through the channel's own send-queue accounting.
  static int PostImmediate(RdmaChannel& ch, uint32_t imm) {
    return ch.PostImmOnly(imm, true, ::vsocket::MonotonicNs() + 1'000'000'000);
  }
  // Posts one raw work request on the channel's QP, unsignalled (errors
  // complete anyway and reset the channel).  0 or the verbs error.
  static int PostRaw(RdmaChannel& ch, ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(ch.qp_, wr, &bad);
  }
  static uint64_t PeerRingAddr(const RdmaChannel& ch) {
    return ch.peer_ring_addr_;
  }
  static uint32_t PeerRkey(const RdmaChannel& ch) { return ch.peer_rkey_; }
  static uint64_t PeerCapacity(const RdmaChannel& ch) { return ch.tx_cap_; }
  static ibv_pd* Pd(const RdmaChannel& ch) { return ch.qp_->pd; }
};

// The hostile peer's hands on its own link.  Friend of RdmaLink (tests
// only).
class RdmaLinkTestPeer {
 public:
  // SENDs `len` raw bytes on QP 0: a control message of its choosing.
  static int PostRawSend(RdmaLink& link, const void* bytes, uint32_t len) {
    std::lock_guard<std::mutex> lock(link.mu_);
    ibv_sge sge = {reinterpret_cast<uintptr_t>(bytes), len, 0};
    ibv_send_wr wr = {};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_INLINE;
    return link.PostSendLocked(0, &wr, 1, 0);
  }
};

}  // namespace vsocket::rdma

namespace {

using vsocket::FallbackReason;
using vsocket::FallbackReasonName;
using vsocket::rdma::RdmaChannel;
using vsocket::rdma::RdmaChannelTestPeer;
using vsocket::rdma::RdmaLink;
using vsocket::rdma::RdmaLinkTestPeer;
using vsocket::rdma::WaitOptions;
using vsocket_rdma_test::Addr;
using vsocket_rdma_test::Connect;
using vsocket_rdma_test::Ctl;
using vsocket_rdma_test::Fail;
using vsocket_rdma_test::Listen;
using vsocket_rdma_test::NowUs;
using vsocket_rdma_test::RunPair;
using vsocket_rdma_test::RunScenarios;
using vsocket_rdma_test::Scenario;
using vsocket_rdma_test::SelfIp;

namespace wire = vsocket::rdma;

constexpr char kHello[16] = "honest-message!";
constexpr int64_t kDetectLimitMs = 1000;  // issue 14: within 1 s
constexpr int kEchoRounds = 50;

std::string Name(int fd) {
  const char* n = vsocket_transport_name(fd);
  return n ? n : "(null)";
}

// Connection A, made by hand: the steps of a vsocket client's connect()
// (docs/PROTOCOL.md section 6) with the channel kept by the caller.
struct HandMade {
  int tcp_fd = -1;
  std::unique_ptr<RdmaChannel> channel;
};

HandMade HandConnect(int port) {
  HandMade m;
  m.tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(m.tcp_fd >= 0, "socket");
  sockaddr_in self = Addr(SelfIp(), 0);
  CHECK(bind(m.tcp_fd, reinterpret_cast<sockaddr*>(&self), sizeof(self)) == 0,
        "bind");
  socklen_t len = sizeof(self);
  CHECK(getsockname(m.tcp_fd, reinterpret_cast<sockaddr*>(&self), &len) == 0,
        "getsockname");
  sockaddr_in dst = Addr(SelfIp(), port);
  FallbackReason reason =
      vsocket::rdma::ProbeRdmaPeer(dst, ntohs(self.sin_port), &m.channel);
  CHECK(reason == FallbackReason::kNone, "probe: %s",
        FallbackReasonName(reason));
  CHECK(connect(m.tcp_fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0,
        "connect");
  return m;
}

void SendAllApi(int fd, const void* buf, size_t len) {
  vsocket_test::SendAll(vsocket_test::VsocketApi(), fd, buf, len);
}

void RecvAllApi(int fd, void* buf, size_t len) {
  vsocket_test::RecvAll(vsocket_test::VsocketApi(), fd, buf, len);
}

// How the victim's connection A must end up after the attack.
enum class Expect { kResetOrEof, kStillWorks };

// The hostile side's part of a scenario: attacks `a` (after the honest
// message went through).
using Attack = void (*)(RdmaChannel& a);

// One scenario: the victim serves A and B; the peer attacks A, then checks
// that B still echoes.
int RunAttack(Attack attack, Expect expect) {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int a = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(a >= 0, "accept A");
        int b = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(b >= 0, "accept B");
        CHECK(Name(a) == "rdma" && Name(b) == "rdma", "transports %s, %s",
              Name(a).c_str(), Name(b).c_str());
        char got[sizeof(kHello)];
        RecvAllApi(a, got, sizeof(got));
        CHECK(memcmp(got, kHello, sizeof(got)) == 0, "honest message");
        ctl.Send(0, 1);  // A works: attack it
        CHECK(ctl.Recv(0) == 2, "attack done");
        int64_t t0 = NowUs();
        pollfd p = {a, POLLIN, 0};
        int r = vsocket_poll(&p, 1, 3000);
        int64_t ms = (NowUs() - t0) / 1000;
        CHECK(r == 1, "A not readable 3 s after the attack (poll %d)", r);
        char buf[64];
        errno = 0;
        ssize_t n = vsocket_recv(a, buf, sizeof(buf), MSG_DONTWAIT);
        if (expect == Expect::kResetOrEof) {
          CHECK(n == 0 || (n == -1 && errno == ECONNRESET),
                "A after the attack: recv %zd, want EOF or ECONNRESET", n);
          CHECK(ms <= kDetectLimitMs, "A ended after %lld ms",
                static_cast<long long>(ms));
        } else {
          CHECK(n == static_cast<ssize_t>(sizeof(kHello)) &&
                    memcmp(buf, kHello, sizeof(kHello)) == 0,
                "A after legal traffic: recv %zd", n);
        }
        // B still serves.
        for (int i = 0; i < kEchoRounds; ++i) {
          uint64_t v;
          RecvAllApi(b, &v, sizeof(v));
          SendAllApi(b, &v, sizeof(v));
        }
        ctl.Send(0, 3);
        CHECK(ctl.Recv(0) == 4, "peer done");
        vsocket_close(a);
        vsocket_close(b);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port = static_cast<int>(ctl.Recv(1));
        HandMade a = HandConnect(port);
        int b = Connect(port);
        CHECK(a.channel->Send(kHello, sizeof(kHello), WaitOptions{}) ==
                  static_cast<ssize_t>(sizeof(kHello)),
              "honest send");
        CHECK(ctl.Recv(1) == 1, "victim ready");
        attack(*a.channel);
        if (expect == Expect::kStillWorks) {
          CHECK(a.channel->Send(kHello, sizeof(kHello), WaitOptions{}) ==
                    static_cast<ssize_t>(sizeof(kHello)),
                "send after legal traffic");
          // A bare channel made by the transport's probe corks a Send that
          // follows a Send (rdma_channel.h, "Corking"); with no transport
          // around it, its owner's next call posts it.
          a.channel->PollNow();
        }
        ctl.Send(1, 2);
        for (uint64_t i = 0; i < kEchoRounds; ++i) {
          uint64_t v = i * 0x9E3779B97F4A7C15ull, back = 0;
          SendAllApi(b, &v, sizeof(v));
          RecvAllApi(b, &back, sizeof(back));
          CHECK(back == v, "B echo %llu", static_cast<unsigned long long>(i));
        }
        CHECK(ctl.Recv(1) == 3, "victim done");
        ctl.Send(1, 4);
        a.channel->Abort();
        close(a.tcp_fd);
        vsocket_close(b);
      });
}

void Post(RdmaChannel& a, uint32_t imm) {
  CHECK(RdmaChannelTestPeer::PostImmediate(a, imm) == 0, "post immediate");
}

// Waits (≤ 1 s) until our own channel saw the NIC refuse a work request.
void ExpectRefused(RdmaChannel& a, const char* what) {
  int64_t end = NowUs() + 1'000'000;
  while (a.error() == 0 && NowUs() < end) a.ReadableBytes();
  CHECK(a.error() != 0, "%s: the victim's NIC accepted it", what);
}

// RDMA WRITE of `len` bytes of 0xff from our own memory to `remote_addr`
// with the victim's rkey.
void RawWrite(RdmaChannel& a, uint64_t remote_addr, size_t len) {
  static std::vector<uint8_t> junk(1 << 16, 0xff);
  ibv_mr* mr = ibv_reg_mr(RdmaChannelTestPeer::Pd(a), junk.data(), junk.size(),
                          IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != nullptr, "ibv_reg_mr");
  ibv_sge sge = {reinterpret_cast<uintptr_t>(junk.data()),
                 static_cast<uint32_t>(len), mr->lkey};
  ibv_send_wr wr = {};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr_id = 0;  // covers no WR of the channel's own accounting
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = RdmaChannelTestPeer::PeerRkey(a);
  CHECK(RdmaChannelTestPeer::PostRaw(a, &wr) == 0, "post write");
  // The MR stays registered: the write may still be in flight.
}

// --- the attacks --------------------------------------------------------------

// A data immediate for more bytes than the victim's ring has free.
void DataOverflow(RdmaChannel& a) {
  // (A whole ring is legal: the peer may fill it.  One byte more is not.)
  Post(a, wire::kImmData |
              static_cast<uint32_t>(RdmaChannelTestPeer::PeerCapacity(a) + 1));
}
// A data immediate of zero bytes (a vsocket sender never posts one).
void DataZero(RdmaChannel& a) { Post(a, wire::kImmData | 0); }
// A credit for bytes the victim never sent.
void CreditUnsent(RdmaChannel& a) { Post(a, wire::kImmCredit | 4096); }
// A control value nobody defined.
void ControlUnknown(RdmaChannel& a) { Post(a, wire::kImmControl | 77); }
// The fourth immediate type (undefined).
void TypeUnknown(RdmaChannel& a) { Post(a, (3u << 30) | 5); }
// Data after our own end of stream.
void DataAfterFin(RdmaChannel& a) {
  Post(a, wire::kImmControl | wire::kCtlFin);
  Post(a, wire::kImmData | 8);
}
// A two-sided SEND (vsocket only ever writes with immediates): zero bytes,
// then with a payload the victim's empty receive requests cannot hold.
void PlainSend(RdmaChannel& a) {
  ibv_send_wr wr = {};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  CHECK(RdmaChannelTestPeer::PostRaw(a, &wr) == 0, "post send");
}
void PlainSendPayload(RdmaChannel& a) {
  static char payload[64] = "payload";
  ibv_mr* mr = ibv_reg_mr(RdmaChannelTestPeer::Pd(a), payload, sizeof(payload),
                          IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != nullptr, "ibv_reg_mr");
  ibv_sge sge = {reinterpret_cast<uintptr_t>(payload), sizeof(payload),
                 mr->lkey};
  ibv_send_wr wr = {};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  CHECK(RdmaChannelTestPeer::PostRaw(a, &wr) == 0, "post send");
}
// Writes over the ring's control block (head, tail, flags live just before
// the data area in the victim's memory): the rkey must not reach it.
void WriteControlBlock(RdmaChannel& a) {
  uint64_t ring = RdmaChannelTestPeer::PeerRingAddr(a);
  RawWrite(a, ring - vsocket::fifo::kRingDataOffset,
           vsocket::fifo::kRingDataOffset);
  ExpectRefused(a, "a write over the victim's ring control block");
  a.Abort();
}
// Writes just past the end of the ring.
void WritePastRing(RdmaChannel& a) {
  uint64_t end = RdmaChannelTestPeer::PeerRingAddr(a) +
                 RdmaChannelTestPeer::PeerCapacity(a);
  RawWrite(a, end, 4096);
  ExpectRefused(a, "a write past the victim's ring");
  a.Abort();
}
// Legal but useless traffic: 20,000 no-op control immediates.  The victim
// must stay responsive and A must keep working.
void NopFlood(RdmaChannel& a) {
  for (int i = 0; i < 20000; ++i) Post(a, wire::kImmControl | wire::kCtlNop);
}

int DataOverflowScenario() { return RunAttack(DataOverflow, Expect::kResetOrEof); }
int DataZeroScenario() { return RunAttack(DataZero, Expect::kResetOrEof); }
int CreditUnsentScenario() { return RunAttack(CreditUnsent, Expect::kResetOrEof); }
int ControlUnknownScenario() { return RunAttack(ControlUnknown, Expect::kResetOrEof); }
int TypeUnknownScenario() { return RunAttack(TypeUnknown, Expect::kResetOrEof); }
int DataAfterFinScenario() { return RunAttack(DataAfterFin, Expect::kResetOrEof); }
int PlainSendScenario() { return RunAttack(PlainSend, Expect::kResetOrEof); }
int PlainSendPayloadScenario() { return RunAttack(PlainSendPayload, Expect::kResetOrEof); }
int WriteControlBlockScenario() { return RunAttack(WriteControlBlock, Expect::kResetOrEof); }
int WritePastRingScenario() { return RunAttack(WritePastRing, Expect::kResetOrEof); }
int NopFloodScenario() { return RunAttack(NopFlood, Expect::kStillWorks); }

// --- hello_then_vanish: RDMA handshakes whose TCP connection never comes --
// The peer completes 8 RDMA CM handshakes naming TCP ports it never connects
// from, and holds them.  The victim keeps serving an ordinary connection, and
// resets every parked channel whose TCP connection is not in its kernel at
// two claim-timeout checks in a row (docs/PROTOCOL.md section 6, "Server:
// listen()"; rdma_transport_test late_accept: one that is waits).
int HelloThenVanishScenario() {
  constexpr int kHeld = 8;
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_CLAIM_TIMEOUT_MS", "1000", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int b = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(b >= 0, "accept");
        CHECK(Name(b) == "rdma", "transport %s", Name(b).c_str());
        for (int i = 0; i < kEchoRounds; ++i) {
          uint64_t v;
          RecvAllApi(b, &v, sizeof(v));
          SendAllApi(b, &v, sizeof(v));
        }
        CHECK(ctl.Recv(0) == 1, "peer done");
        vsocket_close(b);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        int port = static_cast<int>(ctl.Recv(1));
        std::vector<std::unique_ptr<RdmaChannel>> held;
        for (int i = 0; i < kHeld; ++i) {
          std::unique_ptr<RdmaChannel> ch;
          // Ports nobody connects from (the victim cannot tell).
          FallbackReason reason = vsocket::rdma::ProbeRdmaPeer(
              Addr(SelfIp(), port), static_cast<uint16_t>(61000 + i), &ch);
          CHECK(reason == FallbackReason::kNone, "probe %d: %s", i,
                FallbackReasonName(reason));
          held.push_back(std::move(ch));
        }
        int b = Connect(port);
        CHECK(Name(b) == "rdma", "transport %s", Name(b).c_str());
        for (uint64_t i = 0; i < kEchoRounds; ++i) {
          uint64_t v = i + 1, back = 0;
          SendAllApi(b, &v, sizeof(v));
          RecvAllApi(b, &back, sizeof(back));
          CHECK(back == v, "echo %llu", static_cast<unsigned long long>(i));
        }
        // Two of the victim's claim timeouts (1 s each: the second check
        // that finds no TCP connection resets) plus slack for the guest.
        int64_t end = NowUs() + 5'000'000;
        for (auto& ch : held) {
          while (ch->error() == 0 && NowUs() < end) {
            ch->ReadableBytes();
            usleep(1000);
          }
          CHECK(ch->error() == ECONNRESET,
                "a held channel outlived the victim's claim timeout");
        }
        ctl.Send(1, 1);
        vsocket_close(b);
      });
}

// --- link_*: attacks on a link (see the top of the file) -------------------

// A connection on a hand-made link, made as a vsocket client makes one.
struct LinkHandMade {
  int tcp_fd = -1;
  vsocket::rdma::LinkConnection conn;
  std::unique_ptr<RdmaChannel> channel;
};

LinkHandMade LinkHandConnect(const std::shared_ptr<RdmaLink>& link, int port) {
  LinkHandMade m;
  m.tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(m.tcp_fd >= 0, "socket");
  sockaddr_in self = Addr(SelfIp(), 0);
  CHECK(bind(m.tcp_fd, reinterpret_cast<sockaddr*>(&self), sizeof(self)) == 0, "bind");
  socklen_t len = sizeof(self);
  CHECK(getsockname(m.tcp_fd, reinterpret_cast<sockaddr*>(&self), &len) == 0,
        "getsockname");
  uint8_t cause = 0;
  CHECK(link->Open(ntohs(self.sin_port), 64 * 1024,
                   vsocket::MonotonicNs() + 5'000'000'000, &m.conn, &cause) == 0,
        "link Open: %s (cause %u)", strerror(errno), cause);
  m.channel = RdmaChannel::OnLink(link, m.conn, link->pool(),
                                  vsocket::rdma::ConnectionOptions());
  CHECK(m.channel != nullptr, "channel on the link");
  sockaddr_in dst = Addr(SelfIp(), port);
  CHECK(connect(m.tcp_fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0, "connect");
  return m;
}

using LinkAttack = void (*)(RdmaLink& link, const vsocket::rdma::LinkConnection& a);

void LinkSlotNotOpen(RdmaLink& link, const vsocket::rdma::LinkConnection& a) {
  vsocket::rdma::LinkConnection forged = a;
  forged.peer_slot = 4000;  // never opened on the victim
  CHECK(link.PostToPeer(forged, nullptr, 0, 0, 0, wire::kImmData, 1, false) == 0,
        "post the immediate");
}
void LinkControlUnknown(RdmaLink& link, const vsocket::rdma::LinkConnection&) {
  uint8_t msg[wire::link::kControlBytes] = {};
  msg[0] = 0x7f;  // no such op
  CHECK(RdmaLinkTestPeer::PostRawSend(link, msg, sizeof(msg)) == 0, "post the SEND");
}
void LinkDataOverflow(RdmaLink& link, const vsocket::rdma::LinkConnection& a) {
  // One byte more than A's ring holds (no credit ever granted it), in
  // immediates of at most link::kMaxImmCount each, as a sender must.
  uint64_t left = uint64_t{a.peer_capacity} + 1;
  while (left > 0) {
    const uint32_t n = static_cast<uint32_t>(
        std::min<uint64_t>(left, wire::link::kMaxImmCount));
    CHECK(link.PostToPeer(a, nullptr, 0, 0, 0, wire::kImmData, n, false) == 0,
          "post the DATA");
    left -= n;
  }
}
void LinkCreditUnsent(RdmaLink& link, const vsocket::rdma::LinkConnection& a) {
  // The victim sent nothing on A after the honest message's echo... nor
  // before: a credit for 1,000 bytes it never sent.
  CHECK(link.PostToPeer(a, nullptr, 0, 0, 0, wire::kImmCredit, 1000, false) == 0,
        "post the CREDIT");
}

// `whole_link`: the attack is the link's fault (A2 ends too), else A's.
int RunLinkAttack(LinkAttack attack, bool whole_link) {
  return RunPair(
      [&](Ctl& ctl) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_RDMA_LINKS", "1", 1);
        int port;
        int lfd = Listen(&port);
        ctl.Send(0, port);
        int a = vsocket_accept(lfd, nullptr, nullptr);
        int a2 = vsocket_accept(lfd, nullptr, nullptr);
        int b = vsocket_accept(lfd, nullptr, nullptr);
        CHECK(a >= 0 && a2 >= 0 && b >= 0, "accept");
        CHECK(Name(a) == "rdma" && Name(a2) == "rdma" && Name(b) == "rdma",
              "transports %s, %s, %s", Name(a).c_str(), Name(a2).c_str(), Name(b).c_str());
        char got[sizeof(kHello)];
        RecvAllApi(a, got, sizeof(got));
        CHECK(memcmp(got, kHello, sizeof(got)) == 0, "honest message on A");
        RecvAllApi(a2, got, sizeof(got));
        CHECK(memcmp(got, kHello, sizeof(got)) == 0, "honest message on A2");
        ctl.Send(0, 1);  // attack
        CHECK(ctl.Recv(0) == 2, "attack done");
        std::vector<int> ended = {a};
        if (whole_link) ended.push_back(a2);
        const int64_t t0 = NowUs();
        for (int fd : ended) {
          // Bytes the peer was granted may come first (link_data_overflow's
          // first immediates fit the ring: garbage, but allowed); then the
          // end: EOF or ECONNRESET, within 1 s of the attack.
          const char* name = fd == a ? "A" : "A2";
          for (;;) {
            pollfd p = {fd, POLLIN, 0};
            int r = vsocket_poll(&p, 1, 3000);
            CHECK(r == 1, "%s not readable 3 s after the attack (poll %d)", name, r);
            char buf[4096];
            errno = 0;
            ssize_t n = vsocket_recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n > 0 || (n == -1 && errno == EAGAIN)) continue;
            CHECK(n == 0 || (n == -1 && errno == ECONNRESET),
                  "%s after the attack: recv %zd, want EOF or ECONNRESET", name, n);
            break;
          }
          int64_t ms = (NowUs() - t0) / 1000;
          CHECK(ms <= kDetectLimitMs, "%s ended after %lld ms", name,
                static_cast<long long>(ms));
        }
        if (!whole_link) {  // A2, on the same link, still carries data
          SendAllApi(a2, kHello, sizeof(kHello));
          RecvAllApi(a2, got, sizeof(got));
          CHECK(memcmp(got, kHello, sizeof(got)) == 0, "A2's echo after the attack");
        }
        for (int i = 0; i < kEchoRounds; ++i) {
          uint64_t v;
          RecvAllApi(b, &v, sizeof(v));
          SendAllApi(b, &v, sizeof(v));
        }
        ctl.Send(0, 3);
        CHECK(ctl.Recv(0) == 4, "peer done");
        vsocket_close(a);
        vsocket_close(a2);
        vsocket_close(b);
        vsocket_close(lfd);
      },
      [&](Ctl& ctl, pid_t) {
        setenv("VSOCKET_TRANSPORT", "rdma", 1);
        setenv("VSOCKET_RDMA_LINKS", "1", 1);
        int port = static_cast<int>(ctl.Recv(1));
        std::string error;
        std::shared_ptr<RdmaLink> link =
            RdmaLink::Connect(Addr(SelfIp(), port), vsocket::rdma::LinkOptions(), &error);
        CHECK(link != nullptr, "link: %s", error.c_str());
        LinkHandMade a = LinkHandConnect(link, port);
        LinkHandMade a2 = LinkHandConnect(link, port);
        int b = Connect(port);
        CHECK(Name(b) == "rdma", "B: %s", Name(b).c_str());
        for (LinkHandMade* m : {&a, &a2}) {
          CHECK(m->channel->Send(kHello, sizeof(kHello), WaitOptions{}) ==
                    static_cast<ssize_t>(sizeof(kHello)),
                "honest send");
          m->channel->PollNow();  // posts it if corked
        }
        CHECK(ctl.Recv(1) == 1, "victim ready");
        attack(*link, a.conn);
        ctl.Send(1, 2);
        if (!whole_link) {
          char got[sizeof(kHello)];
          CHECK(a2.channel->Recv(got, sizeof(got), WaitOptions{}) ==
                    static_cast<ssize_t>(sizeof(got)) &&
                    memcmp(got, kHello, sizeof(got)) == 0,
                "A2: the victim's message");
          CHECK(a2.channel->Send(kHello, sizeof(kHello), WaitOptions{}) ==
                    static_cast<ssize_t>(sizeof(kHello)),
                "A2: echo");
          a2.channel->PollNow();
        }
        for (uint64_t i = 0; i < kEchoRounds; ++i) {
          uint64_t v = i * 0x9E3779B97F4A7C15ull, back = 0;
          SendAllApi(b, &v, sizeof(v));
          RecvAllApi(b, &back, sizeof(back));
          CHECK(back == v, "B echo %llu", static_cast<unsigned long long>(i));
        }
        CHECK(ctl.Recv(1) == 3, "victim done");
        ctl.Send(1, 4);
        a.channel->Abort();
        a2.channel->Abort();
        close(a.tcp_fd);
        close(a2.tcp_fd);
        vsocket_close(b);
      });
}

int LinkSlotNotOpenScenario() { return RunLinkAttack(LinkSlotNotOpen, true); }
int LinkControlUnknownScenario() { return RunLinkAttack(LinkControlUnknown, true); }
int LinkDataOverflowScenario() { return RunLinkAttack(LinkDataOverflow, false); }
int LinkCreditUnsentScenario() { return RunLinkAttack(LinkCreditUnsent, false); }

constexpr Scenario kScenarios[] = {
    {"data_overflow", DataOverflowScenario},
    {"data_zero", DataZeroScenario},
    {"credit_unsent", CreditUnsentScenario},
    {"control_unknown", ControlUnknownScenario},
    {"type_unknown", TypeUnknownScenario},
    {"data_after_fin", DataAfterFinScenario},
    {"plain_send", PlainSendScenario},
    {"plain_send_payload", PlainSendPayloadScenario},
    {"write_control_block", WriteControlBlockScenario},
    {"write_past_ring", WritePastRingScenario},
    {"nop_flood", NopFloodScenario},
    {"hello_then_vanish", HelloThenVanishScenario},
    {"link_slot_not_open", LinkSlotNotOpenScenario},
    {"link_control_unknown", LinkControlUnknownScenario},
    {"link_data_overflow", LinkDataOverflowScenario},
    {"link_credit_unsent", LinkCreditUnsentScenario},
};

}  // namespace

int main(int argc, char** argv) {
  // The hostile peer of the first scenarios speaks the per-connection wire
  // (PROTOCOL.md 6.1) on the channel's own QP; the link_* scenarios set
  // VSOCKET_RDMA_LINKS=1 in both processes.
  setenv("VSOCKET_RDMA_LINKS", "0", 1);
  return RunScenarios(argc, argv, kScenarios, /*pair_alarm_s=*/60);
}
