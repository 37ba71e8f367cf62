// Deterministic pseudo-random data shared by the test peers and the tests.
//
// ByteStream: an endless byte sequence fully determined by its seed; the bytes
// at a given offset do not depend on how the reader splits its Fill() calls,
// so a sender writing in random-sized pieces and a test hashing the stream in
// one go see the same bytes.
// Rng: a small generator for sizes and choices (xoshiro256**, seeded through
// splitmix64).
#ifndef VSOCKET_TESTS_SUPPORT_BYTE_STREAM_H_
#define VSOCKET_TESTS_SUPPORT_BYTE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace vsocket_test {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n);
  // An I/O size in [1, max], skewed toward small sizes: a power-of-two bound
  // 2^k with k uniform, then uniform below it. Covers 1-byte and max-size I/O.
  size_t IoSize(size_t max);

 private:
  uint64_t s_[4];
};

class ByteStream {
 public:
  explicit ByteStream(uint64_t seed) : rng_(seed) {}
  // Writes the next n bytes of the stream into out.
  void Fill(void* out, size_t n);

 private:
  Rng rng_;
  uint64_t word_ = 0;
  int word_left_ = 0;  // unconsumed low-order bytes of word_
};

// Hex SHA-256 of the first `bytes` bytes of ByteStream(seed).
std::string StreamSha256Hex(uint64_t seed, uint64_t bytes);

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_BYTE_STREAM_H_
