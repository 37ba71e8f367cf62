// What the io_uring engine tests (uring_engine_test.cc, uring_sqpoll_test.cc,
// toe_cork_test.cc) share: a plain TCP program's loopback listener, a
// connected pair whose peer is a plain kernel socket (as kernel sockets, or
// as a vsocket connection under this process's VSOCKET_TRANSPORT), a byte
// pattern, the stats, and engine calls on one buffer.  Test code: failures are gtest expectations.
#ifndef VSOCKET_TESTS_UNIT_URING_TEST_PAIR_H_
#define VSOCKET_TESTS_UNIT_URING_TEST_PAIR_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "toe_backend/uring_engine.h"
#include "vsocket/vsocket.h"

namespace vsocket::toe {

inline uint8_t PatternByte(uint64_t offset) {
  return static_cast<uint8_t>((offset * 131) ^ (offset >> 9));
}

// A loopback listener of a plain TCP program, on an ephemeral port.
struct Listener {
  int fd = -1;
  sockaddr_in addr = {};
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  }
  ~Listener() { close(fd); }
};

// A connected loopback pair of plain kernel sockets, close-on-exec.
struct Pair {
  int ours = -1;  // adopted by the engine
  int peer = -1;  // a plain TCP program's end
  Pair() {
    Listener l;
    ours = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(connect(ours, reinterpret_cast<sockaddr*>(&l.addr), sizeof(l.addr)), 0);
    peer = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  ~Pair() {
    if (ours >= 0) close(ours);
    if (peer >= 0) close(peer);
  }
};

// A vsocket connection to a plain TCP program's listener; `fd` is -1 when
// it could not be made (an expectation failed).
struct VsocketPair {
  Listener l;
  int fd = -1;    // vsocket_socket + vsocket_connect
  int peer = -1;  // the plain program's accepted end
  VsocketPair() {
    int s = vsocket_socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(s, 0);
    if (s < 0) return;
    int rc = vsocket_connect(s, reinterpret_cast<sockaddr*>(&l.addr), sizeof(l.addr));
    EXPECT_EQ(rc, 0);
    if (rc != 0) {
      vsocket_close(s);
      return;
    }
    fd = s;
    peer = accept(l.fd, nullptr, nullptr);
  }
  ~VsocketPair() {
    if (fd >= 0) vsocket_close(fd);
    if (peer >= 0) close(peer);
  }
};

// VSOCKET_STATS (with its toe_engine section), read through the public API.
inline std::string StatsJson() {
  std::string json(1 << 16, '\0');
  size_t n = vsocket_stats_json(json.data(), json.size());
  json.resize(std::min(n, json.size()));
  return json;
}

// The number after "key": in `json`, 0 when absent.
inline uint64_t StatsNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return 0;
  return std::strtoull(json.c_str() + at + key.size() + 3, nullptr, 10);
}

// Engine Recv and Send on one buffer.
inline ssize_t RecvInto(UringEngine& e, ToeHandle h, void* buf, size_t len, int flags) {
  iovec v = {buf, len};
  msghdr m = {};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  return e.Recv(h, &m, flags);
}

inline ssize_t SendFrom(UringEngine& e, ToeHandle h, const void* buf, size_t len,
                        int flags) {
  iovec v = {const_cast<void*>(buf), len};
  msghdr m = {};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  return e.Send(h, &m, flags);
}

}  // namespace vsocket::toe

#endif  // VSOCKET_TESTS_UNIT_URING_TEST_PAIR_H_
