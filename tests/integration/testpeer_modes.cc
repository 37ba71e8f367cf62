#include "testpeer_modes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "byte_stream.h"
#include "sha256.h"
#include "testpeer_io.h"

namespace testpeer {

const char kBanner[] = "220 vsocket-testpeer ready; server speaks first\r\n";

namespace {

using vsocket_test::ByteStream;
using vsocket_test::Rng;
using vsocket_test::Sha256;

constexpr size_t kMaxIo = 256 * 1024;    // largest single write/read
constexpr uint64_t kSizeSalt = 0x51e5;   // derives the size Rng from a seed
constexpr uint64_t kCallSalt = 0xca11;   // derives the call-choice Rng
constexpr uint64_t kReadSeed = 0x4ead;   // read sizes do not depend on data

uint64_t ToU64(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 0); }

// Reads until EOF or error, hashing; emits
// "received bytes=N sha256=H end=eof|ERRNO t_ns=T".
bool ReceiveToEof(int fd) {
  Rng sizes(kReadSeed), calls(kReadSeed ^ kCallSalt);
  std::vector<char> buf(kMaxIo);
  Sha256 hash;
  uint64_t total = 0;
  ssize_t r;
  while ((r = ReadSome(fd, buf.data(), sizes.IoSize(kMaxIo), calls)) > 0) {
    hash.Update(buf.data(), r);
    total += r;
  }
  int err = r < 0 ? errno : 0;
  Emit("received bytes=%llu sha256=%s end=%s t_ns=%lld",
       static_cast<unsigned long long>(total), Sha256::Hex(hash.Finish()).c_str(),
       r == 0 ? "eof" : ErrName(err).c_str(), static_cast<long long>(NowNs()));
  return r == 0;
}

// Writes `bytes` of ByteStream(seed) in random-sized writes; emits
// "sent bytes=N sha256=H t_ns=T" (plus error=ERRNO if a write failed).
// With stall_after >= 0, stops writing after that many bytes, emits
// "stalled bytes=N" and sleeps until killed.
bool SendStream(int fd, uint64_t bytes, uint64_t seed, int64_t stall_after) {
  ByteStream stream(seed);
  Rng sizes(seed ^ kSizeSalt), calls(seed ^ kCallSalt);
  std::vector<char> buf(kMaxIo);
  Sha256 hash;
  uint64_t sent = 0;
  while (sent < bytes) {
    if (stall_after >= 0 && sent >= static_cast<uint64_t>(stall_after)) {
      Emit("stalled bytes=%llu", static_cast<unsigned long long>(sent));
      for (;;) pause();
    }
    uint64_t limit = bytes;
    if (stall_after >= 0 && static_cast<uint64_t>(stall_after) < limit) limit = stall_after;
    size_t n = sizes.IoSize(kMaxIo);
    if (n > limit - sent) n = limit - sent;
    stream.Fill(buf.data(), n);
    if (!WriteAll(fd, buf.data(), n, calls)) {
      int err = errno;
      Emit("sent bytes=%llu sha256=%s error=%s", static_cast<unsigned long long>(sent),
           Sha256::Hex(hash.Finish()).c_str(), ErrName(err).c_str());
      return false;
    }
    hash.Update(buf.data(), n);
    sent += n;
  }
  Emit("sent bytes=%llu sha256=%s t_ns=%lld", static_cast<unsigned long long>(sent),
       Sha256::Hex(hash.Finish()).c_str(), static_cast<long long>(NowNs()));
  return true;
}

// Echoes until EOF; emits "echoed bytes=N end=eof|ERRNO".
bool Echo(int fd) {
  Rng calls(kCallSalt);
  std::vector<char> buf(64 * 1024);
  uint64_t total = 0;
  ssize_t r;
  while ((r = ReadSome(fd, buf.data(), buf.size(), calls)) > 0) {
    if (!WriteAll(fd, buf.data(), r, calls)) {
      r = -1;
      break;
    }
    total += r;
  }
  Emit("echoed bytes=%llu end=%s", static_cast<unsigned long long>(total),
       r == 0 ? "eof" : ErrName(errno).c_str());
  return r == 0;
}

bool ModeSink(const ModeConfig& m, int fd) {
  if (!ReceiveToEof(fd)) return false;
  if (m.reply_bytes < 0) return true;
  return SendStream(fd, m.reply_bytes, m.reply_seed, -1);
}

bool ModeSource(const ModeConfig& m, int fd) {
  if (!SendStream(fd, ToU64(m.args[0]), ToU64(m.args[1]), m.stall_after)) return false;
  int r = Api().shutdown(fd, SHUT_WR);
  Emit("shutdown ret=%d errno=%s", r, ErrName(r < 0 ? errno : 0).c_str());
  return ReceiveToEof(fd) && r == 0;
}

bool ModeBanner(int fd) {
  Rng calls(kCallSalt);
  if (!WriteAll(fd, kBanner, sizeof(kBanner) - 1, calls)) Die("write_banner");
  Emit("banner_sent bytes=%zu", sizeof(kBanner) - 1);
  return Echo(fd);
}

// Ping-pong with an echo server: COUNT messages of random size, each read
// back in full and compared before the next is sent.
bool ModeRoundtrip(const ModeConfig& m, int fd) {
  if (m.expect_banner) {
    char got[sizeof(kBanner) - 1];
    bool read_ok = ReadExact(fd, got, sizeof(got));
    bool ok = read_ok && std::memcmp(got, kBanner, sizeof(got)) == 0;
    Emit("banner ok=%d bytes=%zu sha256=%s", ok ? 1 : 0, sizeof(got),
         vsocket_test::Sha256::HexOf(got, sizeof(got)).c_str());
    if (!ok) return false;
  }
  const uint64_t count = ToU64(m.args[0]), seed = ToU64(m.args[1]);
  ByteStream stream(seed);
  Rng sizes(seed ^ kSizeSalt), calls(seed ^ kCallSalt);
  std::vector<char> out(64 * 1024), in(64 * 1024);
  uint64_t bytes = 0, mismatches = 0;
  for (uint64_t i = 0; i < count; ++i) {
    size_t n = sizes.IoSize(out.size());
    stream.Fill(out.data(), n);
    if (!WriteAll(fd, out.data(), n, calls)) Die("roundtrip_write");
    if (!ReadExact(fd, in.data(), n)) Die("roundtrip_read");
    if (std::memcmp(out.data(), in.data(), n) != 0) ++mismatches;
    bytes += n;
  }
  Emit("roundtrip count=%llu bytes=%llu mismatches=%llu",
       static_cast<unsigned long long>(count), static_cast<unsigned long long>(bytes),
       static_cast<unsigned long long>(mismatches));
  int r = Api().shutdown(fd, SHUT_WR);
  if (r != 0) Die("shutdown");
  return ReceiveToEof(fd) && mismatches == 0;
}

// Lines of /proc/self/maps that map a vsocket ring file; emits one
// "mapped path=P deleted=0|1 own_pool=0|1" line per mapping when `emit`.
// The process's own live statistics page (stat-<pid>, mapped for its whole
// life) is not a ring and is left out.  `own_pools`, when given, counts
// the mappings of this process's own pools (pool-<pid>-*, fifo_bridge/
// shm_pool.h), which stay mapped while it lives.
int CountVsocketMappings(bool emit, int* own_pools = nullptr) {
  const std::string own_prefix = "/pool-" + std::to_string(getpid()) + "-";
  if (own_pools) *own_pools = 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int count = 0;
  while (std::getline(maps, line)) {
    size_t at = line.find("/dev/shm/vsocket-");
    if (at == std::string::npos) continue;
    if (line.find("/stat-", at) != std::string::npos) continue;
    ++count;
    std::string path = line.substr(at);
    bool deleted = false;
    const std::string kDeleted = " (deleted)";
    if (path.ends_with(kDeleted)) {
      path.resize(path.size() - kDeleted.size());
      deleted = true;
    }
    bool own_pool = path.find(own_prefix) != std::string::npos;
    if (own_pool && own_pools) ++*own_pools;
    if (emit) {
      Emit("mapped path=%s deleted=%d own_pool=%d", path.c_str(), deleted ? 1 : 0,
           own_pool ? 1 : 0);
    }
  }
  return count;
}

volatile sig_atomic_t g_sigpipes = 0;
void OnSigpipe(int) { g_sigpipes = g_sigpipes + 1; }

// The side that survives a SIGKILLed peer. Receives until READY_BYTES have
// arrived, reports its ring mappings and "ready", then keeps receiving until
// recv returns 0 or -1 and reports how and when ("eof"). Then probes sends
// (MSG_NOSIGNAL, then without it under a SIGPIPE handler), closes, and
// reports the ring mappings left ("closed maps=N").
bool ModeSurvivor(const ModeConfig& m, int* fd) {
  const uint64_t ready_bytes = ToU64(m.args[0]);
  std::vector<char> buf(64 * 1024);
  uint64_t total = 0;
  bool announced = false;
  ssize_t r;
  for (;;) {
    r = Api().recv(*fd, buf.data(), buf.size(), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    total += r;
    if (!announced && total >= ready_bytes) {
      int n = CountVsocketMappings(true);
      Emit("ready received=%llu mappings=%d", static_cast<unsigned long long>(total), n);
      announced = true;
    }
  }
  const int64_t t_end = NowNs();
  const int recv_errno = r < 0 ? errno : 0;
  Emit("eof ret=%zd errno=%s t_ns=%lld received=%llu", r, ErrName(recv_errno).c_str(),
       static_cast<long long>(t_end), static_cast<unsigned long long>(total));

  // Sends after the peer died: continue until the first failure, then two
  // more attempts, so the sequence shows what follows the first error.
  std::string results;
  int failures = 0;
  for (int i = 0; i < 50 && failures < 3; ++i) {
    ssize_t w = Api().send(*fd, "x", 1, MSG_NOSIGNAL);
    if (!results.empty()) results += ",";
    results += w == 1 ? "ok" : ErrName(errno);
    if (w != 1) ++failures;
    if (w == 1) SleepMs(10);
  }
  Emit("nosignal_sends results=%s", results.c_str());

  struct sigaction sa{};
  sa.sa_handler = OnSigpipe;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
  ssize_t w = Api().send(*fd, "x", 1, 0);
  int send_errno = errno;
  Emit("signal_send ret=%zd errno=%s sigpipe=%d", w, ErrName(w < 0 ? send_errno : 0).c_str(),
       static_cast<int>(g_sigpipes));
  w = Api().write(*fd, "x", 1);
  int write_errno = errno;
  Emit("signal_write ret=%zd errno=%s sigpipe=%d", w,
       ErrName(w < 0 ? write_errno : 0).c_str(), static_cast<int>(g_sigpipes));

  int c = Api().close(*fd);
  *fd = -1;
  int own_pools = 0;
  int maps = CountVsocketMappings(false, &own_pools);
  Emit("closed ret=%d maps=%d own_pool_maps=%d", c, maps, own_pools);
  return true;
}

// Reads READ_BYTES, waits DELAY_MS so the peer's remaining data arrives, and
// returns; the caller then closes with that data unread.
bool ModeCloseUnread(const ModeConfig& m, int fd) {
  const uint64_t read_bytes = ToU64(m.args[0]);
  std::vector<char> buf(read_bytes + 1);
  if (!ReadExact(fd, buf.data(), read_bytes)) Die("close_unread_read");
  SleepMs(static_cast<int>(ToU64(m.args[1])));
  Emit("closing_unread read=%llu", static_cast<unsigned long long>(read_bytes));
  return true;
}

// Sends BYTES (no shutdown), then reports the next recv and one more send.
bool ModeSendThenRecv(const ModeConfig& m, int fd) {
  if (!SendStream(fd, ToU64(m.args[0]), ToU64(m.args[1]), -1)) return false;
  char c;
  ssize_t r;
  do {
    r = Api().recv(fd, &c, 1, 0);
  } while (r < 0 && errno == EINTR);
  Emit("recv ret=%zd errno=%s", r, ErrName(r < 0 ? errno : 0).c_str());
  ssize_t w = Api().send(fd, "x", 1, MSG_NOSIGNAL);
  Emit("send ret=%zd errno=%s", w, ErrName(w < 0 ? errno : 0).c_str());
  return true;
}

// ---- poll-probe / poll-partner: a scripted exchange over a control pipe.
// Command frame: 1 byte command + 8 bytes argument; acknowledged with 'k'.

void CtlSend(const ModeConfig& m, char cmd, uint64_t arg = 0) {
  char frame[9];
  frame[0] = cmd;
  std::memcpy(frame + 1, &arg, 8);
  if (::write(m.ctl_out, frame, sizeof(frame)) != sizeof(frame)) Die("ctl_write");
}

// Receives one frame within 10 s; dies otherwise.
void CtlRecv(const ModeConfig& m, char* cmd, uint64_t* arg) {
  char frame[9];
  size_t got = 0;
  while (got < sizeof(frame)) {
    pollfd p = {m.ctl_in, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) Die("ctl_poll");
    ssize_t r = ::read(m.ctl_in, frame + got, sizeof(frame) - got);
    if (r <= 0) Die("ctl_read");
    got += r;
  }
  *cmd = frame[0];
  std::memcpy(arg, frame + 1, 8);
}

void CtlAck(const ModeConfig& m) {
  char cmd;
  uint64_t arg;
  CtlRecv(m, &cmd, &arg);
  if (cmd != 'k') Die("ctl_ack");
}

// Plain libc poll() on the descriptor; emits
// "poll step=S n=N revents=0xR ms=M".
void PollStep(int fd, const char* step, short events, int timeout_ms) {
  pollfd p = {fd, events, 0};
  int64_t t0 = NowNs();
  int n = ::poll(&p, 1, timeout_ms);
  int64_t ms = (NowNs() - t0) / 1'000'000;
  Emit("poll step=%s n=%d revents=0x%x ms=%lld", step, n, p.revents & 0xffff,
       static_cast<long long>(ms));
}

bool ModePollProbe(const ModeConfig& m, int fd) {
  // Nothing sent yet: not readable.
  PollStep(fd, "idle", POLLIN, 200);

  // Peer writes 1000 bytes: readable; after reading them: not readable.
  CtlSend(m, 'W');
  CtlAck(m);
  PollStep(fd, "readable", POLLIN, 2000);
  char small[1000];
  if (!ReadExact(fd, small, sizeof(small))) Die("probe_read");
  PollStep(fd, "drained", POLLIN, 0);

  // Fill the send direction with a non-blocking writer until EAGAIN.
  PollStep(fd, "writable", POLLOUT, 0);
  int fl = Api().fcntl(fd, F_GETFL, 0);
  if (fl < 0 || Api().fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) Die("set_nonblock");
  std::vector<char> chunk(64 * 1024, 'f');
  uint64_t filled = 0;
  int fill_errno = 0;
  while (filled < (1ULL << 30)) {
    ssize_t w = Api().send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      fill_errno = errno;
      break;
    }
    filled += w;
  }
  Emit("fill bytes=%llu errno=%s", static_cast<unsigned long long>(filled),
       ErrName(fill_errno).c_str());
  PollStep(fd, "full", POLLOUT, 0);
  PollStep(fd, "full_wait", POLLOUT, 200);

  // Peer drains everything: a blocked poll for POLLOUT wakes.
  CtlSend(m, 'D', filled);
  PollStep(fd, "unblocked", POLLOUT, 5000);
  CtlAck(m);
  if (Api().fcntl(fd, F_SETFL, fl) != 0) Die("set_blocking");

  // Peer writes one byte 300 ms from now: a blocked poll wakes on it.
  CtlSend(m, 'S');
  CtlAck(m);
  PollStep(fd, "wake_data", POLLIN, 5000);
  if (!ReadExact(fd, small, 1)) Die("probe_read_byte");

  // Peer closes 300 ms from now: a blocked poll wakes.
  CtlSend(m, 'C');
  CtlAck(m);
  PollStep(fd, "wake_close", POLLIN, 5000);
  ssize_t r = Api().recv(fd, small, 1, 0);
  Emit("recv ret=%zd errno=%s", r, ErrName(r < 0 ? errno : 0).c_str());
  return true;
}

bool ModePollPartner(const ModeConfig& m, int* fd) {
  for (;;) {
    char cmd;
    uint64_t arg;
    CtlRecv(m, &cmd, &arg);
    Rng calls(kCallSalt);
    switch (cmd) {
      case 'W': {
        std::vector<char> data(1000, 'w');
        if (!WriteAll(*fd, data.data(), data.size(), calls)) Die("partner_write");
        CtlSend(m, 'k');
        break;
      }
      case 'D': {
        std::vector<char> sink(arg);
        if (!ReadExact(*fd, sink.data(), arg)) Die("partner_drain");
        Emit("drained bytes=%llu", static_cast<unsigned long long>(arg));
        CtlSend(m, 'k');
        break;
      }
      case 'S':
        CtlSend(m, 'k');
        SleepMs(300);
        if (!WriteAll(*fd, "z", 1, calls)) Die("partner_write_byte");
        break;
      case 'C':
        CtlSend(m, 'k');
        SleepMs(300);
        Emit("partner_close ret=%d", Api().close(*fd));
        *fd = -1;
        return true;
      default:
        Die("partner_command");
    }
  }
}

struct ModeSpec {
  size_t args;
};
const std::map<std::string, ModeSpec> kModes = {
    {"sink", {0}},         {"source", {2}},       {"echo", {0}},
    {"banner", {0}},       {"roundtrip", {2}},    {"survivor", {1}},
    {"close-unread", {2}}, {"send-then-recv", {2}}, {"poll-probe", {0}},
    {"poll-partner", {0}},
};

}  // namespace

std::string ValidateMode(const ModeConfig& m) {
  auto it = kModes.find(m.name);
  if (it == kModes.end()) return "unknown mode '" + m.name + "'";
  if (m.args.size() != it->second.args) {
    return "mode " + m.name + " takes " + std::to_string(it->second.args) + " arguments";
  }
  if (m.name.starts_with("poll-") && (m.ctl_in < 0 || m.ctl_out < 0)) {
    return "mode " + m.name + " needs --ctl-in and --ctl-out";
  }
  return "";
}

bool RunMode(const ModeConfig& m, int* fd) {
  if (m.name == "sink") return ModeSink(m, *fd);
  if (m.name == "source") return ModeSource(m, *fd);
  if (m.name == "echo") return Echo(*fd);
  if (m.name == "banner") return ModeBanner(*fd);
  if (m.name == "roundtrip") return ModeRoundtrip(m, *fd);
  if (m.name == "survivor") return ModeSurvivor(m, fd);
  if (m.name == "close-unread") return ModeCloseUnread(m, *fd);
  if (m.name == "send-then-recv") return ModeSendThenRecv(m, *fd);
  if (m.name == "poll-probe") return ModePollProbe(m, *fd);
  if (m.name == "poll-partner") return ModePollPartner(m, fd);
  return false;
}

}  // namespace testpeer
