// Small helpers for scatter/gather arrays, shared by the transports.
#ifndef VSOCKET_VSOCKET_IOVEC_UTIL_H_
#define VSOCKET_VSOCKET_IOVEC_UTIL_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vsocket {

// Total length of iov[0, n).
inline uint64_t IovTotal(const struct iovec* iov, size_t n) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += iov[i].iov_len;
  return total;
}

// A copy of iov[0, n) without its first `skip` bytes (allocates: use it
// only once a call has already moved some bytes).
inline std::vector<struct iovec> IovSuffix(const struct iovec* iov, size_t n,
                                           uint64_t skip) {
  std::vector<struct iovec> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    out.push_back({static_cast<char*>(iov[i].iov_base) + skip,
                   iov[i].iov_len - skip});
    skip = 0;
  }
  return out;
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_IOVEC_UTIL_H_
