#include "vsocket/config.h"

#include <errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>


namespace vsocket {

bool ParseConfigSize(const char* text, uint64_t* out) {
  // Digits only: strtoull alone would take leading blanks and a sign ("-1"
  // is 2^64 - 1) and saturate on overflow.
  if (*text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (errno == ERANGE) return false;
  unsigned shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end != '\0') return false;
  if (shift != 0 && value > (~0ull >> shift)) return false;  // would wrap
  *out = value << shift;
  return true;
}

void WarnConfigValue(const char* name, const char* value, const char* kept) {
  std::fprintf(stderr, "vsocket: ignoring %s=%s (%s)\n", name, value, kept);
}

namespace {

const char* FromEnvironment(const char* name, void*) { return std::getenv(name); }

// Copied by the library's static initialisation, before main().
const std::string g_program_name =
    program_invocation_short_name ? program_invocation_short_name : "";

}  // namespace

Config ParseConfig(ConfigLookup lookup, void* context) {
  auto get = [&](const char* name) { return lookup(name, context); };
  Config config;
  if (const char* v = get("VSOCKET_TRANSPORT")) {
    if (!std::strcmp(v, "auto") || !*v) {
      config.policy = TransportPolicy::kAuto;
    } else if (!std::strcmp(v, "tcp")) {
      config.policy = TransportPolicy::kTcp;
    } else if (std::strlen(v) < 32) {
      // A provider's name; path selection checks that it exists.
      config.policy = TransportPolicy::kNamed;
      config.transport = v;
    } else {
      WarnConfigValue("VSOCKET_TRANSPORT", v, "expected auto, tcp or a transport's name; using auto");
    }
  }
  if (const char* v = get("VSOCKET_RING_SIZE")) {
    uint64_t bytes = 0;
    if (ParseConfigSize(v, &bytes) && IsValidRingBytes(bytes)) {
      config.ring_bytes = bytes;
    } else {
      WarnConfigValue("VSOCKET_RING_SIZE", v, "expected a power of two from 4K to 1G");
    }
  }
  if (const char* v = get("VSOCKET_SPIN_US")) {
    uint64_t us = 0;
    if (ParseConfigSize(v, &us) && us <= 1000000) {
      config.spin_us = static_cast<uint32_t>(us);
      config.spin_us_named = true;
    } else {
      WarnConfigValue("VSOCKET_SPIN_US", v, "expected 0..1000000");
    }
  }
  if (const char* v = get("VSOCKET_LOG")) {
    if (!std::strcmp(v, "error")) config.log_level = LogLevel::kError;
    else if (!std::strcmp(v, "warn")) config.log_level = LogLevel::kWarn;
    else if (!std::strcmp(v, "info")) config.log_level = LogLevel::kInfo;
    else if (!std::strcmp(v, "debug")) config.log_level = LogLevel::kDebug;
    else WarnConfigValue("VSOCKET_LOG", v, "expected error, warn, info or debug");
  }
  if (const char* v = get("VSOCKET_STATS")) {
    config.print_stats = *v && std::strcmp(v, "0") != 0;
  }
  if (const char* v = get("VSOCKET_STDIO")) {
    if (!std::strcmp(v, "tcp")) config.stdio_on_tcp = true;
    else if (!std::strcmp(v, "keep")) config.stdio_on_tcp = false;
    else WarnConfigValue("VSOCKET_STDIO", v, "expected tcp or keep; using tcp");
  }
  if (const char* v = get("VSOCKET_SHORT_CALLS")) {
    uint64_t n = 0;
    if (ParseConfigSize(v, &n) && n <= 1024) config.short_calls = static_cast<uint32_t>(n);
    else WarnConfigValue("VSOCKET_SHORT_CALLS", v, "expected 0..1024");
  }
  if (const char* v = get("VSOCKET_SPIN_THREADS")) {
    uint64_t n = 0;
    if (ParseConfigSize(v, &n) && n <= 4096) config.spin_threads = static_cast<uint32_t>(n);
    else WarnConfigValue("VSOCKET_SPIN_THREADS", v, "expected 0..4096");
  }
  if (const char* v = get("VSOCKET_CLAIM_TIMEOUT_MS")) {
    uint64_t ms = 0;
    if (ParseConfigSize(v, &ms) && ms >= 1 && ms <= 600000) config.claim_timeout_ms = static_cast<uint32_t>(ms);
    else WarnConfigValue("VSOCKET_CLAIM_TIMEOUT_MS", v, "expected 1..600000");
  }
  if (const char* v = get("VSOCKET_LIVE_STATS")) {
    if (!std::strcmp(v, "0")) config.live_stats = false;
    else if (!std::strcmp(v, "1")) config.live_stats = true;
    else WarnConfigValue("VSOCKET_LIVE_STATS", v, "expected 0 or 1; using 1");
  }
  if (const char* v = get("VSOCKET_CONFIG")) {
    if (std::strlen(v) < 180) {
      config.rules_file = v;
      config.rules_file_named = *v != '\0';
    } else {
      WarnConfigValue("VSOCKET_CONFIG", "(too long)", "a path of at most 179 bytes; using /etc/vsocket.conf");
    }
  }
  return config;
}

const char* ProgramName() { return g_program_name.c_str(); }

uint32_t DefaultSpinUs(long online_cpus) { return online_cpus > 1 ? Config{}.spin_us : 0; }

const Config& GetConfig() {
  static const Config config = [] {
    Config c = ParseConfig(FromEnvironment, nullptr);
    if (!c.spin_us_named) c.spin_us = DefaultSpinUs(sysconf(_SC_NPROCESSORS_ONLN));
    return c;
  }();
  return config;
}

}  // namespace vsocket
