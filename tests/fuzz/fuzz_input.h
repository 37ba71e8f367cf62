// Helpers shared by the fuzz targets: a reader that takes typed values off
// the front of the input (zeros once it is used up), and a check that stays
// on in optimised builds (assert() does not).
#ifndef VSOCKET_TESTS_FUZZ_FUZZ_INPUT_H_
#define VSOCKET_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__,      \
                   __LINE__, #cond);                                        \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

namespace vsocket_fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }

  template <typename T>
  T Take() {
    T value{};
    size_t n = sizeof(T) < remaining() ? sizeof(T) : remaining();
    if (n > 0) std::memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }
  // Up to `n` bytes as they are.
  std::string TakeBytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }
  std::string TakeRest() { return TakeBytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace vsocket_fuzz

#endif  // VSOCKET_TESTS_FUZZ_FUZZ_INPUT_H_
