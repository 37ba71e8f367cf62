#include "bench_protocol.h"

#include <cstring>

#include "bench_net.h"

namespace vbench {
namespace {

constexpr uint32_t kMagic = 0x5653424e;  // "VSBN"
constexpr uint32_t kVersion = 1;
constexpr size_t kNameBytes = 16;
constexpr size_t kAckTextBytes = 120;

// Fixed-size big-endian encoder/decoder over a byte array.
class Writer {
 public:
  explicit Writer(uint8_t* out) : p_(out) {}
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void text(const std::string& s, size_t width) {
    std::memset(p_, 0, width);
    std::memcpy(p_, s.data(), s.size() < width - 1 ? s.size() : width - 1);
    p_ += width;
  }

 private:
  void put(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) *p_++ = uint8_t(v >> (8 * i));
  }
  uint8_t* p_;
};

class Reader {
 public:
  explicit Reader(const uint8_t* in) : p_(in) {}
  uint32_t u32() { return uint32_t(get(4)); }
  uint64_t u64() { return get(8); }
  std::string text(size_t width) {
    std::string s(reinterpret_cast<const char*>(p_), strnlen(reinterpret_cast<const char*>(p_), width));
    p_ += width;
    return s;
  }

 private:
  uint64_t get(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | *p_++;
    return v;
  }
  const uint8_t* p_;
};

constexpr size_t kRequestBytes = 4 * 4 + 8 + kNameBytes;
constexpr size_t kAckBytes = 4 * 2 + kAckTextBytes;
constexpr size_t kReportBytes = 4 * 2 + 8 * 5;

void check_header(Reader& in, const char* what) {
  uint32_t magic = in.u32();
  uint32_t version = in.u32();
  if (magic != kMagic)
    throw BenchError(std::string("bad ") + what +
                     ": peer is not a vsocket-bench of this protocol");
  if (version != kVersion)
    throw BenchError(std::string("bad ") + what + ": protocol version " +
                     std::to_string(version) + ", expected " +
                     std::to_string(kVersion));
}

}  // namespace

void send_request(int fd, const Request& request) {
  uint8_t buf[kRequestBytes];
  Writer out(buf);
  out.u32(kMagic);
  out.u32(kVersion);
  out.u32(uint32_t(request.mode));
  out.u32(request.io_timeout_ms);
  out.u64(request.msg_size);
  out.text(request.transport, kNameBytes);
  send_all(fd, buf, sizeof buf);
}

bool recv_request(int fd, Request* request) {
  uint8_t buf[kRequestBytes];
  if (!recv_all(fd, buf, sizeof buf)) return false;
  Reader in(buf);
  check_header(in, "request");
  uint32_t mode = in.u32();
  if (mode < uint32_t(Mode::kPingPong) || mode > uint32_t(Mode::kConnect))
    throw BenchError("bad request: unknown mode " + std::to_string(mode));
  request->mode = Mode(mode);
  request->io_timeout_ms = in.u32();
  request->msg_size = in.u64();
  request->transport = in.text(kNameBytes);
  return true;
}

void send_ack(int fd, const Ack& ack) {
  uint8_t buf[kAckBytes];
  Writer out(buf);
  out.u32(kMagic);
  out.u32(ack.accepted ? 1 : 0);
  out.text(ack.message, kAckTextBytes);
  send_all(fd, buf, sizeof buf);
}

Ack recv_ack(int fd) {
  uint8_t buf[kAckBytes];
  if (!recv_all(fd, buf, sizeof buf))
    throw BenchError("server closed the connection instead of answering");
  Reader in(buf);
  if (in.u32() != kMagic)
    throw BenchError("bad answer: peer is not a vsocket-bench server");
  Ack ack;
  ack.accepted = in.u32() == 1;
  ack.message = in.text(kAckTextBytes);
  return ack;
}

void send_report(int fd, const ServerReport& report) {
  uint8_t buf[kReportBytes];
  Writer out(buf);
  out.u32(kMagic);
  out.u32(kVersion);
  out.u64(report.messages);
  out.u64(report.bytes);
  out.u64(uint64_t(report.elapsed_ns));
  out.u64(uint64_t(report.cpu.user_us));
  out.u64(uint64_t(report.cpu.sys_us));
  send_all(fd, buf, sizeof buf);
}

ServerReport recv_report(int fd) {
  uint8_t buf[kReportBytes];
  if (!recv_all(fd, buf, sizeof buf))
    throw BenchError("server closed the connection before its report");
  Reader in(buf);
  check_header(in, "server report");
  ServerReport report;
  report.messages = in.u64();
  report.bytes = in.u64();
  report.elapsed_ns = int64_t(in.u64());
  report.cpu.user_us = int64_t(in.u64());
  report.cpu.sys_us = int64_t(in.u64());
  return report;
}

}  // namespace vbench
