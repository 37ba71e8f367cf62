#include "toe_backend/toe_config.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "vsocket/config.h"

namespace vsocket::toe {
namespace {

static_assert(kDefaultSqpollIdleMs == 10 && kMaxSqpollIdleMs == 60000 &&
                  kMaxSqpollSpinUs == 1000,
              "the warnings below name them");

// A decimal `name` from 0 to `max` into *out: true when set and valid;
// set but not valid, one warning (`expected`) and *out is left alone.
bool ParseUpTo(const char* name, uint32_t max, const char* expected, uint32_t* out) {
  const char* v = std::getenv(name);
  if (!v) return false;
  uint32_t value = 0;
  const char* end = v + std::strlen(v);
  auto [at, ec] = std::from_chars(v, end, value);
  if (ec != std::errc() || at != end || at == v || value > max) {
    WarnConfigValue(name, v, expected);
    return false;
  }
  *out = value;
  return true;
}

ToeConfig Load() {
  ToeConfig config;
  if (const char* v = std::getenv("VSOCKET_TOE_READAHEAD")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) &&
        (bytes == 0 || (IsValidRingBytes(bytes) && bytes <= (1u << 20)))) {
      config.readahead_bytes = static_cast<uint32_t>(bytes);
    } else {
      WarnConfigValue("VSOCKET_TOE_READAHEAD", v,
                      "expected 0 or a power of two from 4K to 1M");
    }
  }
  if (const char* v = std::getenv("VSOCKET_TOE_SEND_ZC_MIN")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes)) config.send_zc_min = bytes;
    else WarnConfigValue("VSOCKET_TOE_SEND_ZC_MIN", v, "expected a size (0 = off)");
  }
  if (const char* v = std::getenv("VSOCKET_TOE_READAHEAD_INHERITABLE")) {
    if (v[0] == '0' && !v[1]) config.readahead_inheritable = false;
    else if (v[0] == '1' && !v[1]) config.readahead_inheritable = true;
    else WarnConfigValue("VSOCKET_TOE_READAHEAD_INHERITABLE", v, "expected 0 or 1");
  }
  if (const char* v = std::getenv("VSOCKET_TOE_CORK")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) && bytes <= (1u << 20)) {
      config.cork_bytes = static_cast<uint32_t>(bytes);
    } else {
      WarnConfigValue("VSOCKET_TOE_CORK", v, "expected a size up to 1M (0 = off)");
    }
  }
  uint32_t ms = 0;
  if (ParseUpTo("VSOCKET_TOE_SQPOLL", kMaxSqpollIdleMs,
                "expected 0 (off), 1 (on, 10 ms idle) or the SQ thread's idle "
                "time in ms up to 60000; SQPOLL stays off", &ms)) {
    config.sqpoll_idle_ms = ms == 1 ? kDefaultSqpollIdleMs : ms;
  }
  ParseUpTo("VSOCKET_TOE_SQPOLL_SPIN_US", kMaxSqpollSpinUs,
            "expected microseconds from 0 to 1000; no spin", &config.sqpoll_spin_us);
  return config;
}

}  // namespace

const ToeConfig& GetToeConfig() {
  static const ToeConfig config = Load();
  return config;
}

}  // namespace vsocket::toe
