// SHA-256 as specified in FIPS 180-4, streaming interface.
//
// Test-harness code: written for clarity and independence from the code under
// test, not for speed. Feed bytes with Update() in any split; Finish() returns
// the digest of everything fed since construction and must be called once.
#ifndef VSOCKET_TESTS_SUPPORT_SHA256_H_
#define VSOCKET_TESTS_SUPPORT_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace vsocket_test {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void Update(const void* data, size_t len);
  Digest Finish();

  // Lower-case hex of a digest (64 characters).
  static std::string Hex(const Digest& digest);
  // Hex digest of one buffer.
  static std::string HexOf(const void* data, size_t len);

 private:
  void Compress(const uint8_t* block);

  uint32_t state_[8];
  uint8_t block_[64];
  size_t block_len_ = 0;
  uint64_t total_len_ = 0;
};

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_SHA256_H_
