#include "toe_backend/toe_config.h"

#include <cstdlib>

#include "vsocket/config.h"

namespace vsocket::toe {
namespace {

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
  return config;
}

}  // namespace

const ToeConfig& GetToeConfig() {
  static const ToeConfig config = Load();
  return config;
}

}  // namespace vsocket::toe
