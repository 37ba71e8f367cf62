#include "bench_server.h"

#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_clock.h"
#include "bench_net.h"
#include "bench_protocol.h"
#include "bench_socket_calls.h"
#include "vsocket/vsocket.h"

namespace vbench {
namespace {

// Stream receive buffer: large enough that small messages arrive many per
// recv, as with any bulk receiver.
constexpr size_t kStreamRecvBytes = 256 * 1024;

// The server's measured window: opened by the first kMeasure message.
class MeasuredWindow {
 public:
  bool open() const { return open_; }
  void start() {
    open_ = true;
    start_cpu_ = process_cpu_time();
    start_ns_ = now_ns();
  }
  ServerReport finish(uint64_t messages, uint64_t bytes) const {
    ServerReport report;
    report.messages = messages;
    report.bytes = bytes;
    if (open_) {
      report.elapsed_ns = now_ns() - start_ns_;
      report.cpu = process_cpu_time() - start_cpu_;
    }
    return report;
  }

 private:
  bool open_ = false;
  int64_t start_ns_ = 0;
  CpuTime start_cpu_;
};

[[noreturn]] void throw_bad_flag(uint8_t flag) {
  throw BenchError("protocol error: message flag byte " + std::to_string(flag) +
                   " is none of W/M/E (corrupted data?)");
}

// Echoes each message until kEnd. Reads exactly msg_size bytes per message.
ServerReport serve_pingpong(int fd, size_t msg_size) {
  std::vector<uint8_t> buf(msg_size);
  MeasuredWindow window;
  uint64_t measured = 0;
  for (;;) {
    if (!recv_all(fd, buf.data(), msg_size))
      throw BenchError("client closed the connection before its end message");
    const uint8_t flag = buf[0];
    if (flag == kFlagEnd) break;
    if (flag == kFlagMeasure) {
      if (!window.open()) window.start();
      ++measured;
    } else if (flag != kFlagWarmup) {
      throw_bad_flag(flag);
    }
    send_all(fd, buf.data(), msg_size);
  }
  return window.finish(measured, measured * msg_size * 2);
}

// Counts bytes up to and including the kEnd message. The window opens at
// the recv that brings the first kMeasure message; only bytes received
// after that recv are counted, so bytes/elapsed is an unbiased rate.
// The next chunk of the stream, at most `want` bytes: copied into a buffer
// by vsocket_recv, or (zero copy) viewed in place with vsocket_recv_inplace
// until Release().
class StreamReader {
 public:
  StreamReader(int fd, size_t msg_size, bool zerocopy, size_t recv_size)
      : fd_(fd), zerocopy_(zerocopy),
        buf_(zerocopy ? 0 : recv_size ? recv_size : std::max(msg_size, kStreamRecvBytes)) {}
  size_t max_chunk() const { return zerocopy_ ? kStreamRecvBytes : buf_.size(); }
  // Returns the chunk's length (0 at end of stream); *data points at it.
  size_t Next(size_t want, const uint8_t** data) {
    if (!zerocopy_) {
      *data = buf_.data();
      return recv_some(fd_, buf_.data(), want);
    }
    for (;;) {
      const void* view = nullptr;
      ssize_t n = vsocket_recv_inplace(fd_, &view, want, 0);
      if (n >= 0) {
        *data = static_cast<const uint8_t*>(view);
        held_ = size_t(n);
        return size_t(n);
      }
      if (errno != EINTR) throw_errno("vsocket_recv_inplace");
    }
  }
  // Done with the chunk Next() returned.
  void Release() {
    if (!zerocopy_ || held_ == 0) return;
    if (vsocket_recv_release(fd_, held_) != 0) throw_errno("vsocket_recv_release");
    held_ = 0;
  }

 private:
  int fd_;
  bool zerocopy_;
  std::vector<uint8_t> buf_;
  size_t held_ = 0;
};

ServerReport serve_stream(int fd, size_t msg_size, bool zerocopy, size_t recv_size) {
  StreamReader reader(fd, msg_size, zerocopy && !KernelSockets(), recv_size);
  MeasuredWindow window;
  uint64_t received = 0;          // bytes so far, all phases
  uint64_t window_base = 0;       // `received` when the window opened
  uint64_t end_at = UINT64_MAX;   // offset just past the kEnd message
  while (received < end_at) {
    size_t want = size_t(std::min<uint64_t>(reader.max_chunk(), end_at - received));
    const uint8_t* buf = nullptr;
    size_t n = reader.Next(want, &buf);
    if (n == 0)
      throw BenchError("client closed the connection before its end message");
    // Inspect the flag of every message that starts inside this chunk.
    uint64_t first = (received + msg_size - 1) / msg_size;
    for (uint64_t m = first; m * msg_size < received + n; ++m) {
      const uint8_t flag = buf[m * msg_size - received];
      if (flag == kFlagEnd) {
        end_at = (m + 1) * msg_size;
      } else if (flag != kFlagMeasure && flag != kFlagWarmup) {
        throw_bad_flag(flag);
      }
      if (flag != kFlagWarmup && !window.open()) {
        window.start();
        window_base = received + n;
      }
    }
    reader.Release();
    received += n;
  }
  uint64_t bytes = received - window_base;
  return window.finish(bytes / msg_size, bytes);
}

// Accepts one short connection, echoes its one byte, closes it.
void serve_short_connection(int listen_fd, int io_timeout_ms) {
  int fd = Sock().accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) return;
    throw_errno("accept");
  }
  try {
    set_io_timeout(fd, io_timeout_ms);
    uint8_t byte;
    if (!recv_all(fd, &byte, 1))
      throw BenchError("short connection closed before its byte");
    send_all(fd, &byte, 1);
  } catch (...) {
    Sock().close(fd);
    throw;
  }
  Sock().close(fd);
}

// Serves short connections until the control connection says kEnd.
ServerReport serve_connect(int control_fd, int listen_fd, int io_timeout_ms) {
  MeasuredWindow window;
  uint64_t served = 0;
  for (;;) {
    pollfd fds[2] = {{control_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    int rc = Sock().poll(fds, 2, io_timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll");
    }
    if (rc == 0)
      throw BenchError("connect mode: no activity for " +
                       std::to_string(io_timeout_ms) + " ms");
    if (fds[0].revents != 0) {  // control first, so kMeasure is seen early
      uint8_t control;
      if (!recv_all(control_fd, &control, 1))
        throw BenchError("client closed the connection before its end byte");
      if (control == kFlagEnd) break;
      if (control != kFlagMeasure) throw_bad_flag(control);
      window.start();
    }
    if (fds[1].revents & POLLIN) {
      serve_short_connection(listen_fd, io_timeout_ms);
      if (window.open()) ++served;
    }
  }
  return window.finish(served, served * 2);
}

void serve_session(int fd, int listen_fd, const ServerOptions& options) {
  set_io_timeout(fd, options.io_timeout_ms);
  set_nodelay(fd);
  Request request;
  // EOF before a request: the client saw the wrong transport and left.
  if (!recv_request(fd, &request)) return;
  if (options.verbose)
    std::fprintf(stderr, "server: %s %llu B (client asked for %s, conn is %s)\n",
                 mode_name(request.mode),
                 static_cast<unsigned long long>(request.msg_size),
                 request.transport.c_str(), transport_of(fd).c_str());
  if (request.msg_size < 1 || request.msg_size > kMaxMessageSize) {
    send_ack(fd, {false, "message size " + std::to_string(request.msg_size) +
                             " outside 1.." + std::to_string(kMaxMessageSize)});
    return;
  }
  int timeout_ms = std::max<int>(options.io_timeout_ms, int(request.io_timeout_ms));
  set_io_timeout(fd, timeout_ms);
  send_ack(fd, {true, ""});

  ServerReport report;
  switch (request.mode) {
    case Mode::kPingPong: report = serve_pingpong(fd, request.msg_size); break;
    case Mode::kStream: report = serve_stream(fd, request.msg_size, options.zerocopy, options.recv_size); break;
    case Mode::kConnect: report = serve_connect(fd, listen_fd, timeout_ms); break;
  }
  send_report(fd, report);
}

}  // namespace

void serve(int listen_fd, const ServerOptions& options) {
  int64_t idle_since_ns = now_ns();
  for (;;) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {options.stop_fd, POLLIN, 0}};
    nfds_t count = options.stop_fd >= 0 ? 2 : 1;
    int timeout_ms = -1;
    if (options.idle_exit_ms > 0) {
      int64_t idle_ms = (now_ns() - idle_since_ns) / 1'000'000;
      if (idle_ms >= options.idle_exit_ms) {
        std::fprintf(stderr, "server: idle for %d ms, exiting\n",
                     options.idle_exit_ms);
        return;
      }
      timeout_ms = int(options.idle_exit_ms - idle_ms);
    }
    int rc = Sock().poll(fds, count, timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll(listening socket)");
    }
    if (count == 2 && fds[1].revents != 0) return;
    if (!(fds[0].revents & POLLIN)) continue;

    int fd = Sock().accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      throw_errno("accept");
    }
    try {
      serve_session(fd, listen_fd, options);
    } catch (const BenchError& e) {
      std::fprintf(stderr, "server: session failed: %s\n", e.what());
    }
    Sock().close(fd);
    idle_since_ns = now_ns();
  }
}

}  // namespace vbench
