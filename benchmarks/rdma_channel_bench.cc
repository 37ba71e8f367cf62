// rdma_channel_bench: throughput and latency of rdma_backend's RdmaChannel
// (RdmaListener / RdmaConnect + Send/Recv) between two processes, on a real
// RDMA device (in this project: Soft-RoCE in the tests/rdma_vm guest, run by
// benchmarks/rdma/run.sh).  No socket layer: this is the byte channel the
// future RDMA transport will sit on.
//
//   rdma_channel_bench server IP PORT [OPTIONS]
//       accepts one connection and serves the client's tests until it closes.
//   rdma_channel_bench client IP PORT [OPTIONS] TEST...
//       TEST is one of
//         stream:SIZE:MIB     SIZE-byte Send() calls until MIB MiB are sent;
//                             the server Recv()s them and acknowledges the
//                             last byte; throughput = bytes / (first send ..
//                             ack received)
//         zcopy:SIZE:MIB      the same with SendRegistered() from a buffer
//                             registered once (no copy into the mirror;
//                             each call waits until the NIC read the bytes)
//         zcasync:SIZE:MIB    the same with SendRegisteredAsync() (the
//                             buffer is never modified, so sends overlap;
//                             WaitZeroCopy() on the last ticket at the end)
//         pingpong:SIZE:N     SIZE bytes there and back N times (after 10%
//                             warm-up round trips); RTT median / p99
//   rdma_channel_bench recv-file IP PORT [OPTIONS]
//       accepts one connection, writes every byte received to stdout until
//       the peer shuts down writing (for end-to-end checksums: | sha256sum).
//   rdma_channel_bench send-file IP PORT FILE [OPTIONS]
//       connects, sends FILE, shuts down writing, closes.
//
// OPTIONS (ChannelOptions; give both sides the same):
//   --ring BYTES  --spin-ns NS  --signal-every N  --inline BYTES
//   --sq DEPTH    --rq DEPTH
//
// Output (stdout, one line per test, parsed by benchmarks/rdma/run.sh):
//   RESULT stream size=65536 bytes=134217728 seconds=1.234 gbps=0.870 mibps=103.7
//   RESULT pingpong size=64 n=2000 rtt_p50_us=40.1 rtt_p99_us=80.2 rtt_avg_us=41.0
// Exit status: 0 ok, 1 a check failed (message on stderr), 2 usage.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/rdma_cm_connection.h"

namespace {

using vsocket::rdma::ChannelOptions;
using vsocket::rdma::RdmaChannel;
using vsocket::rdma::RdmaConnect;
using vsocket::rdma::RdmaListener;
using vsocket::rdma::WaitOptions;

constexpr int64_t kIoTimeoutNs = 60'000'000'000;  // any single call
const WaitOptions kWait{kIoTimeoutNs};

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "rdma_channel_bench: %s (errno %d %s)\n", what, errno,
               std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void Usage(const char* msg) {
  std::fprintf(stderr,
               "rdma_channel_bench: %s\n"
               "usage: rdma_channel_bench server IP PORT [OPTIONS]\n"
               "       rdma_channel_bench client IP PORT [OPTIONS] "
               "stream|zcopy|zcasync:SIZE:MIB|pingpong:SIZE:N...\n"
               "       rdma_channel_bench recv-file IP PORT [OPTIONS]\n"
               "       rdma_channel_bench send-file IP PORT FILE [OPTIONS]\n"
               "options: --ring BYTES --spin-ns NS --signal-every N "
               "--inline BYTES --sq DEPTH --rq DEPTH\n",
               msg);
  std::exit(2);
}

// Client -> server test header.  op 0 = done.
enum Op : uint32_t { kDone = 0, kStream = 1, kPingPong = 2 };
struct Header {
  uint32_t op;
  uint32_t size;
  uint64_t count;  // stream: total bytes; pingpong: round trips
};

void SendAll(RdmaChannel* ch, const void* buf, size_t len) {
  ssize_t n = ch->Send(buf, len, kWait);
  if (n != static_cast<ssize_t>(len)) Die("send");
}

void RecvAll(RdmaChannel* ch, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = ch->Recv(p, len, kWait);
    if (n <= 0) Die(n == 0 ? "recv: unexpected end of stream" : "recv");
    p += n;
    len -= static_cast<size_t>(n);
  }
}

sockaddr_in Addr(const char* ip, const char* port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) Usage("bad IPv4 address");
  return a;
}

std::unique_ptr<RdmaChannel> Accept(const sockaddr_in& addr,
                                    const ChannelOptions& opt) {
  std::string err;
  auto l = RdmaListener::Listen(addr, 4, opt, &err);
  if (!l) {
    std::fprintf(stderr, "listen: %s\n", err.c_str());
    Die("listen");
  }
  auto ch = l->Accept(120'000'000'000, &err);
  if (!ch) {
    std::fprintf(stderr, "accept: %s\n", err.c_str());
    Die("accept");
  }
  return ch;
}

// The server may not listen yet: retry refused connects for 30 s.
std::unique_ptr<RdmaChannel> Connect(const sockaddr_in& addr,
                                     const ChannelOptions& opt) {
  int64_t deadline = NowNs() + 30'000'000'000;
  std::string err;
  for (;;) {
    auto ch = RdmaConnect(addr, opt, &err);
    if (ch) return ch;
    if ((errno != ECONNREFUSED && errno != ETIMEDOUT) || NowNs() > deadline) {
      std::fprintf(stderr, "connect: %s\n", err.c_str());
      Die("connect");
    }
    usleep(200'000);
  }
}

void PrintChannel(const char* who, const RdmaChannel& ch,
                  const ChannelOptions& o) {
  std::fprintf(stderr,
               "%s: connected; recv ring %llu B, send mirror %llu B, "
               "max_inline %u (asked %u), signal_every %u, spin_ns %u, "
               "sq %u rq %u\n",
               who, (unsigned long long)ch.recv_capacity(),
               (unsigned long long)ch.send_capacity(), ch.max_inline(),
               o.inline_wanted, o.signal_every, o.spin_ns, o.send_queue_depth,
               o.recv_queue_depth);
}

// ---- server ----

int Server(const sockaddr_in& addr, const ChannelOptions& opt) {
  auto ch = Accept(addr, opt);
  PrintChannel("server", *ch, opt);
  std::vector<uint8_t> buf(4 << 20);
  for (;;) {
    Header h;
    RecvAll(ch.get(), &h, sizeof(h));
    if (h.op == kDone) break;
    if (h.size == 0 || h.size > buf.size()) Die("bad message size in header");
    if (h.op == kStream) {
      uint64_t left = h.count;
      while (left > 0) {
        ssize_t n = ch->Recv(buf.data(), std::min<uint64_t>(left, buf.size()),
                             kWait);
        if (n <= 0) Die("stream recv");
        left -= static_cast<uint64_t>(n);
      }
      char ack = 'A';
      SendAll(ch.get(), &ack, 1);
    } else if (h.op == kPingPong) {
      for (uint64_t i = 0; i < h.count; ++i) {
        RecvAll(ch.get(), buf.data(), h.size);
        SendAll(ch.get(), buf.data(), h.size);
      }
    } else {
      Die("unknown op in header");
    }
  }
  char c;
  ssize_t eof = ch->Recv(&c, 1, kWait);
  if (eof != 0) Die("expected end of stream after the last test");
  ch->Close();
  return 0;
}

// ---- client ----

struct Test {
  std::string kind;  // stream | zcopy | zcasync | pingpong
  uint32_t size;
  uint64_t amount;  // MiB for stream/zcopy, round trips for pingpong
};

Test ParseTest(const std::string& s) {
  Test t;
  size_t a = s.find(':'), b = s.find(':', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) Usage("bad TEST");
  t.kind = s.substr(0, a);
  long long size = std::atoll(s.substr(a + 1, b - a - 1).c_str());
  long long amount = std::atoll(s.substr(b + 1).c_str());
  if (t.kind != "stream" && t.kind != "zcopy" && t.kind != "zcasync" &&
      t.kind != "pingpong")
    Usage("TEST kind must be stream, zcopy, zcasync or pingpong");
  if (size <= 0 || size > (4 << 20) || amount <= 0) Usage("bad TEST numbers");
  t.size = static_cast<uint32_t>(size);
  t.amount = static_cast<uint64_t>(amount);
  return t;
}

void RunStream(RdmaChannel* ch, const Test& t) {
  const uint64_t total = t.amount << 20;
  std::vector<uint8_t> src(t.size);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131);
  std::unique_ptr<vsocket::rdma::UserRegion> region;
  const bool async = t.kind == "zcasync";
  uint64_t ticket = 0;
  if (t.kind == "zcopy" || async) {
    region = ch->RegisterUserBuffer(src.data(), src.size());
    if (!region) Die("RegisterUserBuffer");
  }
  Header h{kStream, t.size, total};
  SendAll(ch, &h, sizeof(h));
  int64_t t0 = NowNs();
  for (uint64_t sent = 0; sent < total;) {
    size_t len = std::min<uint64_t>(t.size, total - sent);
    ssize_t n = async    ? ch->SendRegisteredAsync(*region, 0, len, kWait,
                                                     &ticket)
                : region ? ch->SendRegistered(*region, 0, len, kWait)
                         : ch->Send(src.data(), len, kWait);
    if (n != static_cast<ssize_t>(len)) Die("stream send");
    sent += len;
  }
  if (async && ch->WaitZeroCopy(ticket, kWait) != 0) Die("WaitZeroCopy");
  char ack;
  RecvAll(ch, &ack, 1);
  double secs = (NowNs() - t0) / 1e9;
  std::printf("RESULT %s size=%u bytes=%llu seconds=%.3f gbps=%.4f "
              "mibps=%.2f\n",
              t.kind.c_str(), t.size, (unsigned long long)total, secs,
              total * 8 / secs / 1e9, total / secs / (1 << 20));
}

void RunPingPong(RdmaChannel* ch, const Test& t) {
  const uint64_t warm = std::max<uint64_t>(t.amount / 10, 10);
  Header h{kPingPong, t.size, warm + t.amount};
  SendAll(ch, &h, sizeof(h));
  std::vector<uint8_t> out(t.size), back(t.size);
  std::vector<double> rtt;
  rtt.reserve(t.amount);
  for (uint64_t i = 0; i < warm + t.amount; ++i) {
    std::memset(out.data(), static_cast<int>(i & 0xff), out.size());
    int64_t t0 = NowNs();
    SendAll(ch, out.data(), out.size());
    RecvAll(ch, back.data(), back.size());
    int64_t t1 = NowNs();
    if (std::memcmp(out.data(), back.data(), out.size()) != 0)
      Die("ping-pong echo differs");
    if (i >= warm) rtt.push_back((t1 - t0) / 1e3);
  }
  std::sort(rtt.begin(), rtt.end());
  double sum = 0;
  for (double v : rtt) sum += v;
  std::printf("RESULT pingpong size=%u n=%zu rtt_p50_us=%.2f "
              "rtt_p99_us=%.2f rtt_avg_us=%.2f rtt_min_us=%.2f\n",
              t.size, rtt.size(), rtt[rtt.size() / 2],
              rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)],
              sum / rtt.size(), rtt.front());
}

int Client(const sockaddr_in& addr, const ChannelOptions& opt,
           const std::vector<Test>& tests) {
  auto ch = Connect(addr, opt);
  PrintChannel("client", *ch, opt);
  for (const Test& t : tests) {
    if (t.kind == "pingpong") {
      RunPingPong(ch.get(), t);
    } else {
      RunStream(ch.get(), t);
    }
    std::fflush(stdout);
  }
  Header done{kDone, 0, 0};
  SendAll(ch.get(), &done, sizeof(done));
  if (ch->ShutdownWrite() != 0) Die("ShutdownWrite");
  ch->Close();
  return 0;
}

// ---- file transfer (end-to-end checksums) ----

int RecvFile(const sockaddr_in& addr, const ChannelOptions& opt) {
  auto ch = Accept(addr, opt);
  PrintChannel("recv-file", *ch, opt);
  std::vector<uint8_t> buf(1 << 20);
  uint64_t total = 0;
  int64_t t0 = NowNs();
  for (;;) {
    ssize_t n = ch->Recv(buf.data(), buf.size(), kWait);
    if (n < 0) Die("recv-file recv");
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(STDOUT_FILENO, buf.data() + off, n - off);
      if (w < 0) Die("write stdout");
      off += w;
    }
    total += static_cast<uint64_t>(n);
  }
  double secs = (NowNs() - t0) / 1e9;
  std::fprintf(stderr, "recv-file: %llu bytes in %.2f s (%.1f MiB/s)\n",
               (unsigned long long)total, secs, total / secs / (1 << 20));
  ch->Close();
  return 0;
}

int SendFile(const sockaddr_in& addr, const ChannelOptions& opt,
             const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) Die("open FILE");
  auto ch = Connect(addr, opt);
  PrintChannel("send-file", *ch, opt);
  std::vector<uint8_t> buf(1 << 20);
  uint64_t total = 0;
  int64_t t0 = NowNs();
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) Die("read FILE");
    if (n == 0) break;
    SendAll(ch.get(), buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  close(fd);
  if (ch->ShutdownWrite() != 0) Die("ShutdownWrite");
  double secs = (NowNs() - t0) / 1e9;
  std::fprintf(stderr, "send-file: %llu bytes in %.2f s (%.1f MiB/s)\n",
               (unsigned long long)total, secs, total / secs / (1 << 20));
  ch->Close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  if (argc < 4) Usage("missing arguments");
  std::string mode = argv[1];
  sockaddr_in addr = Addr(argv[2], argv[3]);
  ChannelOptions opt;
  std::vector<Test> tests;
  std::string file;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> uint64_t {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return std::strtoull(argv[++i], nullptr, 0);
    };
    if (a == "--ring") {
      opt.ring_capacity = value();
    } else if (a == "--spin-ns") {
      opt.spin_ns = static_cast<uint32_t>(value());
    } else if (a == "--signal-every") {
      opt.signal_every = static_cast<uint32_t>(value());
    } else if (a == "--inline") {
      opt.inline_wanted = static_cast<uint32_t>(value());
    } else if (a == "--sq") {
      opt.send_queue_depth = static_cast<uint32_t>(value());
    } else if (a == "--rq") {
      opt.recv_queue_depth = static_cast<uint32_t>(value());
    } else if (a.rfind("--", 0) == 0) {
      Usage(("unknown option " + a).c_str());
    } else if (mode == "client") {
      tests.push_back(ParseTest(a));
    } else if (mode == "send-file" && file.empty()) {
      file = a;
    } else {
      Usage(("unexpected argument " + a).c_str());
    }
  }
  if (mode == "server") return Server(addr, opt);
  if (mode == "client") {
    if (tests.empty()) Usage("client needs at least one TEST");
    return Client(addr, opt, tests);
  }
  if (mode == "recv-file") return RecvFile(addr, opt);
  if (mode == "send-file") {
    if (file.empty()) Usage("send-file needs FILE");
    return SendFile(addr, opt, file.c_str());
  }
  Usage("unknown mode");
}
