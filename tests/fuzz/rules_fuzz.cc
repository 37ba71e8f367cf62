// The rules file (vsocket/rules.h): ParseRules on any text, as a file an
// administrator wrote (or a corrupted one) could hold, then MatchRule of
// the result against a few fixed connections.
//
// Checks: a parse either succeeds with rules whose fields are in range (line
// numbers increasing and within the text, ports 1..65535 or any, ring sizes
// valid or 0) or fails with an empty result and one error line
// "<file>:<line>: <problem>" whose line exists in the text; matching never
// returns a rule that is not in the list.
//
// Input: the file's text.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "vsocket/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  vsocket::Rules rules;
  std::string error;
  bool ok = vsocket::ParseRules(text, "fuzz.conf", &rules, &error);
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  if (!ok) {
    FUZZ_CHECK(rules.rules.empty() && rules.file.empty());
    FUZZ_CHECK(error.compare(0, 10, "fuzz.conf:") == 0);
    FUZZ_CHECK(error.find('\n') == std::string::npos);
    size_t line = std::strtoul(error.c_str() + 10, nullptr, 10);
    FUZZ_CHECK(line >= 1 && line <= lines);
    return 0;
  }
  FUZZ_CHECK(rules.file == "fuzz.conf");
  uint32_t previous = 0;
  for (const vsocket::Rule& r : rules.rules) {
    FUZZ_CHECK(r.line > previous && r.line <= lines);
    previous = r.line;
    FUZZ_CHECK(r.ring_bytes == 0 || vsocket::IsValidRingBytes(r.ring_bytes));
    FUZZ_CHECK(r.local.any_port || r.local.port != 0);
    FUZZ_CHECK(r.remote.any_port || r.remote.port != 0);
    FUZZ_CHECK((r.policy == vsocket::TransportPolicy::kNamed) == !r.transport.empty());
  }
  struct sockaddr_in local = {}, remote = {};
  local.sin_family = remote.sin_family = AF_INET;
  local.sin_port = htons(40000);
  remote.sin_port = htons(6379);
  ::inet_pton(AF_INET, "127.0.0.1", &local.sin_addr);
  ::inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  for (auto role : {vsocket::RuleRole::kClient, vsocket::RuleRole::kServer}) {
    const vsocket::Rule* r = vsocket::MatchRule(
        rules, role, "redis-server", reinterpret_cast<struct sockaddr*>(&local),
        role == vsocket::RuleRole::kClient ? reinterpret_cast<struct sockaddr*>(&remote)
                                           : nullptr);
    FUZZ_CHECK(r == nullptr || (r >= rules.rules.data() &&
                                r < rules.rules.data() + rules.rules.size()));
  }
  return 0;
}
