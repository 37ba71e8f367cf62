// Configuration values (vsocket/config.h, fifo_bridge/shm_config.h):
// ParseConfigSize on any text, and ParseConfig and ParseShmConfig on any
// set of VSOCKET_* values, as a user's environment could
// hold them.
//
// Checks: ParseConfigSize accepts exactly <digits>[kKmMgG] whose value fits
// 64 bits, and returns that value (computed here in 128 bits); ParseConfig
// returns every field within its documented range whatever it is given.
//
// Input: NUL-separated values for the variables in kNames, in order (a
// value that is absent is unset); the first value is also given to
// ParseConfigSize alone.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fifo_bridge/shm_config.h"
#include "fuzz_input.h"
#include "vsocket/config.h"

namespace {

const char* const kNames[] = {
    "VSOCKET_TRANSPORT",      "VSOCKET_RING_SIZE",
    "VSOCKET_SPIN_US",        "VSOCKET_LOG",
    "VSOCKET_STATS",          "VSOCKET_STDIO",
    "VSOCKET_FD_SHARE",       "VSOCKET_MAX_SHM_CONNECTIONS",
    "VSOCKET_CLAIM_TIMEOUT_MS", "VSOCKET_SHM_POOL"};
constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);

// The reference: the exact value of <digits>[suffix], or false.
bool ReferenceSize(const std::string& text, uint64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  unsigned shift = 0;
  if (digits + 1 == text.size()) {
    switch (text[digits]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
  } else if (digits != text.size()) {
    return false;
  }
  unsigned __int128 value = 0;
  for (size_t i = 0; i < digits; ++i) {
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
    if (value > ~uint64_t{0}) return false;
  }
  value <<= shift;
  if (value > ~uint64_t{0}) return false;
  *out = static_cast<uint64_t>(value);
  return true;
}

struct Values {
  std::vector<std::string> text;
  std::vector<bool> set;
};

const char* Lookup(const char* name, void* context) {
  auto* values = static_cast<Values*>(context);
  for (size_t i = 0; i < kCount; ++i) {
    if (std::strcmp(name, kNames[i]) == 0)
      return values->set[i] ? values->text[i].c_str() : nullptr;
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string all(reinterpret_cast<const char*>(data), size);
  Values values{std::vector<std::string>(kCount), std::vector<bool>(kCount, false)};
  size_t start = 0;
  for (size_t i = 0; i < kCount && start <= all.size(); ++i) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    values.text[i] = all.substr(start, end - start);
    values.set[i] = true;
    start = end + 1;
  }

  const std::string& first = values.text[0];
  uint64_t parsed = 12345, expected = 0;
  bool ok = vsocket::ParseConfigSize(first.c_str(), &parsed);
  bool ref = first.size() == std::strlen(first.c_str()) && ReferenceSize(first, &expected);
  FUZZ_CHECK(ok == ref);
  if (ok) FUZZ_CHECK(parsed == expected);
  else FUZZ_CHECK(parsed == 12345);  // untouched on failure

  vsocket::Config config = vsocket::ParseConfig(Lookup, &values);
  FUZZ_CHECK(vsocket::IsValidRingBytes(config.ring_bytes));
  FUZZ_CHECK(config.spin_us <= 1000000);
  vsocket::fifo::ShmConfig shm = vsocket::fifo::ParseShmConfig(Lookup, &values);
  FUZZ_CHECK(shm.fd_share_percent <= 90);
  FUZZ_CHECK(shm.max_shm_connections <= (1u << 24));
  FUZZ_CHECK(config.claim_timeout_ms >= 1 && config.claim_timeout_ms <= 600000);
  FUZZ_CHECK(config.log_level >= vsocket::LogLevel::kError &&
             config.log_level <= vsocket::LogLevel::kDebug);
  if (config.policy == vsocket::TransportPolicy::kNamed) {
    FUZZ_CHECK(!config.transport.empty() && config.transport.size() < 32);
  }
  return 0;
}
