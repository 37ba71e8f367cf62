// Descriptor numbers written as text by vsocket itself (the exec hand-over's
// VSOCKET_INHERITED), read back in a new image that must not trust them.
#ifndef VSOCKET_VSOCKET_DESCRIPTOR_NUMBER_H_
#define VSOCKET_VSOCKET_DESCRIPTOR_NUMBER_H_

#include <string>

namespace vsocket {

// Decimal digits only, below 2^20 (no sign, no spaces).  False otherwise.
inline bool ParseDescriptorNumber(const std::string& text, int* fd) {
  if (text.empty() || text.size() > 7) return false;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value >= (1 << 20)) return false;
  *fd = static_cast<int>(value);
  return true;
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_DESCRIPTOR_NUMBER_H_
