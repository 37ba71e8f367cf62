// Deterministic stream content: byte i of the stream is PatternByte(i), so
// a receiver checks any range by its stream offset alone.
#ifndef VSOCKET_TESTS_CONFORMANCE_STREAM_PATTERN_H_
#define VSOCKET_TESTS_CONFORMANCE_STREAM_PATTERN_H_

#include <cstddef>
#include <cstdint>

namespace conformance {

inline uint8_t PatternByte(uint64_t i) {
  uint64_t z = (i >> 3) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  return static_cast<uint8_t>(z >> (8 * (i & 7)));
}

inline void FillPattern(uint64_t offset, uint8_t* buf, size_t len) {
  for (size_t k = 0; k < len; ++k) buf[k] = PatternByte(offset + k);
}

// Whether buf holds the stream's bytes [offset, offset + len).
inline bool MatchesPattern(uint64_t offset, const uint8_t* buf, size_t len) {
  for (size_t k = 0; k < len; ++k) {
    if (buf[k] != PatternByte(offset + k)) return false;
  }
  return true;
}

// FNV-1a, continued from `h` (start with kFnvBasis).
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;
inline uint64_t Fnv1a(uint64_t h, const uint8_t* buf, size_t len) {
  for (size_t k = 0; k < len; ++k) h = (h ^ buf[k]) * 0x100000001b3ull;
  return h;
}

}  // namespace conformance

#endif  // VSOCKET_TESTS_CONFORMANCE_STREAM_PATTERN_H_
