// A byte stream moved through the explicit API's zero-copy calls, mixed with
// ordinary send/recv, for the host test (tests/integration/
// zerocopy_api_test.cc) and the RDMA test (tests/rdma/rdma_zerocopy_test.cc).
// Header-only: usable from both tests without another library.
//
// The sender writes each piece's content into the registered region right
// before sending it and scribbles over it right after the call returns, so
// a send that returned before the NIC (or the copy) was done with the bytes
// shows up as corrupt data on the other side.  The receiver checks every
// byte against the deterministic pattern, and releases random parts of its
// in-place views (0 included) so that unreleased bytes must come back.
#ifndef VSOCKET_TESTS_SUPPORT_ZEROCOPY_STREAM_H_
#define VSOCKET_TESTS_SUPPORT_ZEROCOPY_STREAM_H_

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "vsocket/vsocket.h"

namespace vsocket_zc_test {

// Byte i of stream `seed`.
inline uint64_t PatternWord(uint64_t seed, uint64_t w) {
  uint64_t z = w + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline uint8_t PatternByte(uint64_t seed, uint64_t i) {
  return static_cast<uint8_t>(PatternWord(seed, i >> 3) >> (8 * (i & 7)));
}
inline void FillPattern(uint64_t seed, uint64_t offset, uint8_t* p, size_t n) {
  for (size_t k = 0; k < n; ++k) p[k] = PatternByte(seed, offset + k);
}
// Index of the first wrong byte, or n.
inline size_t CheckPattern(uint64_t seed, uint64_t offset, const uint8_t* p,
                           size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (p[k] != PatternByte(seed, offset + k)) return k;
  }
  return n;
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 2654435761u + 1) {}
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  uint64_t Below(uint64_t n) { return n ? Next() % n : 0; }
};

// A piece size: mostly small and medium, sometimes up to `max`.
inline size_t PieceSize(Rng& rng, size_t max) {
  switch (rng.Below(4)) {
    case 0: return 1 + rng.Below(std::min<size_t>(64, max));
    case 1: return 1 + rng.Below(std::min<size_t>(4096, max));
    case 2: return 1 + rng.Below(std::min<size_t>(65536, max));
    default: return 1 + rng.Below(max);
  }
}

struct SendReport {
  std::string error;       // "" when every byte went out
  uint64_t registered = 0; // bytes sent with vsocket_send_registered
  uint64_t plain = 0;      // bytes sent with vsocket_send
};

// Sends `total` bytes of stream `seed` starting at stream offset `start`:
// about half the pieces with vsocket_send_registered from `region` (whose
// buffer is `rbuf`, `rsize` bytes), the rest with vsocket_send.
inline SendReport SendMixed(int fd, vsocket_region* region, uint8_t* rbuf,
                            size_t rsize, uint64_t seed, uint64_t start,
                            uint64_t total, int flags = MSG_NOSIGNAL) {
  SendReport rep;
  Rng rng(seed ^ 0x5E4D);
  std::vector<uint8_t> plain(std::min<size_t>(rsize, 1 << 20));
  uint64_t off = start;
  char msg[160];
  while (off < start + total) {
    bool zc = rng.Below(2) == 0;
    size_t cap = zc ? rsize : plain.size();
    size_t len = std::min<uint64_t>(PieceSize(rng, cap), start + total - off);
    if (zc) {
      size_t roff = rng.Below(rsize - len + 1);
      FillPattern(seed, off, rbuf + roff, len);
      for (size_t sent = 0; sent < len;) {
        ssize_t n = vsocket_send_registered(fd, region, roff + sent, len - sent, flags);
        if (n <= 0) {
          snprintf(msg, sizeof(msg), "send_registered at %llu: %zd (%s)",
                   static_cast<unsigned long long>(off + sent), n, strerror(errno));
          rep.error = msg;
          return rep;
        }
        sent += static_cast<size_t>(n);
      }
      memset(rbuf + roff, 0xEE, len);  // the call said the buffer is ours
      rep.registered += len;
    } else {
      FillPattern(seed, off, plain.data(), len);
      for (size_t sent = 0; sent < len;) {
        ssize_t n = vsocket_send(fd, plain.data() + sent, len - sent, flags);
        if (n <= 0) {
          snprintf(msg, sizeof(msg), "send at %llu: %zd (%s)",
                   static_cast<unsigned long long>(off + sent), n, strerror(errno));
          rep.error = msg;
          return rep;
        }
        sent += static_cast<size_t>(n);
      }
      rep.plain += len;
    }
    off += len;
  }
  return rep;
}

struct RecvReport {
  std::string error;      // "" when the stream was intact up to its end
  uint64_t bytes = 0;     // bytes consumed
  uint64_t inplace = 0;   // of which through in-place views
  uint64_t views = 0;     // views taken
  bool eof = false;       // ended with end of stream (0)
};

// Receives stream `seed` from offset `start` until `total` bytes were
// consumed (or, with total == UINT64_MAX, until end of stream), alternating
// vsocket_recv_inplace (releasing a random prefix, sometimes nothing) and
// vsocket_recv, checking every byte.
inline RecvReport RecvMixed(int fd, uint64_t seed, uint64_t start,
                            uint64_t total) {
  RecvReport rep;
  Rng rng(seed ^ 0xA11CE);
  std::vector<uint8_t> buf(256 << 10);
  uint64_t off = start;
  char msg[200];
  auto fail = [&](const char* what, ssize_t n) {
    snprintf(msg, sizeof(msg), "%s at %llu: %zd (%s)", what,
             static_cast<unsigned long long>(off), n, strerror(errno));
    rep.error = msg;
    return rep;
  };
  while (off - start < total) {
    size_t want = std::min<uint64_t>(PieceSize(rng, buf.size()), total - (off - start));
    if (rng.Below(3) != 0) {
      const void* view = nullptr;
      ssize_t n = vsocket_recv_inplace(fd, &view, want, 0);
      if (n == 0) break;
      if (n < 0 || static_cast<size_t>(n) > want) return fail("recv_inplace", n);
      ++rep.views;
      size_t bad = CheckPattern(seed, off, static_cast<const uint8_t*>(view), n);
      if (bad != static_cast<size_t>(n)) {
        off += bad;
        return fail("in-place byte differs", n);
      }
      size_t take = rng.Below(8) == 0 ? rng.Below(n + 1) : static_cast<size_t>(n);
      if (vsocket_recv_release(fd, take) != 0) return fail("recv_release", take);
      off += take;
      rep.inplace += take;
    } else {
      ssize_t n = vsocket_recv(fd, buf.data(), want, 0);
      if (n == 0) break;
      if (n < 0) return fail("recv", n);
      size_t bad = CheckPattern(seed, off, buf.data(), n);
      if (bad != static_cast<size_t>(n)) {
        off += bad;
        return fail("received byte differs", n);
      }
      off += static_cast<uint64_t>(n);
    }
  }
  rep.bytes = off - start;
  if (rep.bytes < total) {
    rep.eof = true;
    if (total != UINT64_MAX) return fail("early end of stream", 0);
  }
  return rep;
}

}  // namespace vsocket_zc_test

#endif  // VSOCKET_TESTS_SUPPORT_ZEROCOPY_STREAM_H_
