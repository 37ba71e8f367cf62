#include "byte_stream.h"

#include <bit>
#include <cstring>
#include <vector>

#include "sha256.h"

namespace vsocket_test {
namespace {

static_assert(std::endian::native == std::endian::little,
              "ByteStream::Fill copies words in host order");

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) { return Next() % n; }

size_t Rng::IoSize(size_t max) {
  int bits = 0;
  while ((size_t{1} << (bits + 1)) <= max) ++bits;  // floor(log2(max))
  size_t bound = size_t{1} << Below(bits + 2);      // up to 2^(bits+1)
  if (bound > max) bound = max;
  return 1 + Below(bound);
}

void ByteStream::Fill(void* out, size_t n) {
  uint8_t* p = static_cast<uint8_t*>(out);
  while (n > 0 && word_left_ > 0) {
    *p++ = static_cast<uint8_t>(word_);
    word_ >>= 8;
    --word_left_;
    --n;
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w = rng_.Next();
    std::memcpy(p, &w, 8);  // little-endian host: same bytes as the slow path
  }
  if (n > 0) {
    word_ = rng_.Next();
    word_left_ = 8;
    while (n > 0) {
      *p++ = static_cast<uint8_t>(word_);
      word_ >>= 8;
      --word_left_;
      --n;
    }
  }
}

std::string StreamSha256Hex(uint64_t seed, uint64_t bytes) {
  ByteStream stream(seed);
  Sha256 hash;
  std::vector<uint8_t> buf(1 << 20);
  while (bytes > 0) {
    size_t n = bytes < buf.size() ? bytes : buf.size();
    stream.Fill(buf.data(), n);
    hash.Update(buf.data(), n);
    bytes -= n;
  }
  return Sha256::Hex(hash.Finish());
}

}  // namespace vsocket_test
