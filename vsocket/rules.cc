#include "vsocket/rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/real_libc.h"
#include "base/small_file.h"

namespace vsocket {
namespace {

constexpr size_t kMaxLineBytes = 1024;
constexpr size_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxRules = 4096;

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool ParsePolicy(const std::string& word, Rule* rule) {
  if (word == "auto") {
    rule->policy = TransportPolicy::kAuto;
    return true;
  }
  if (word == "tcp") {
    rule->policy = TransportPolicy::kTcp;
    return true;
  }
  // A transport's name: lower-case letters, digits, '_' (as providers name
  // themselves); whether this build has it is decided when it is used.
  if (word.empty() || word.size() > 31) return false;
  for (char c : word) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  rule->policy = TransportPolicy::kNamed;
  rule->transport = word;
  return true;
}

bool ParsePort(const std::string& text, AddressPattern* p) {
  if (text == "*") return true;
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) return false;
  p->any_port = false;
  p->port = static_cast<uint16_t>(value);
  return true;
}

// "*", "*:*", "*:80", "10.0.0.1:*", "[::1]:80".
bool ParseAddress(const std::string& text, AddressPattern* p) {
  *p = AddressPattern{};
  if (text == "*") return true;
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    if (host != "*") {
      if (::inet_pton(AF_INET6, host.c_str(), p->address) != 1) return false;
      p->any_address = false;
      p->family = AF_INET6;
    }
    return ParsePort(port, p);
  }
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || text.find(':') != colon) return false;
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  if (host != "*") {
    if (::inet_pton(AF_INET, host.c_str(), p->address) != 1) return false;
    p->any_address = false;
    p->family = AF_INET;
  }
  return ParsePort(port, p);
}

// One non-blank, non-comment line.  "" or the problem.
std::string ParseLine(const std::vector<std::string>& f, Rule* rule) {
  if (f.size() < 5 || f.size() > 6) {
    return "expected POLICY ROLE PROGRAM LOCAL REMOTE [ring=SIZE], found " +
           std::to_string(f.size()) + " field" + (f.size() == 1 ? "" : "s");
  }
  if (!ParsePolicy(f[0], rule))
    return "unknown policy '" + f[0] + "' (expected auto, tcp or a transport's name)";
  if (f[1] == "client") rule->role = RuleRole::kClient;
  else if (f[1] == "server") rule->role = RuleRole::kServer;
  else if (f[1] == "*") rule->role = RuleRole::kAny;
  else return "unknown role '" + f[1] + "' (expected client, server or *)";
  rule->program = f[2];
  if (!ParseAddress(f[3], &rule->local))
    return "bad local address '" + f[3] + "' (expected ADDR:PORT, [IPV6]:PORT or *)";
  if (!ParseAddress(f[4], &rule->remote))
    return "bad remote address '" + f[4] + "' (expected ADDR:PORT, [IPV6]:PORT or *)";
  if (f.size() == 6) {
    if (f[5].compare(0, 5, "ring=") != 0) return "unknown option '" + f[5] + "' (expected ring=SIZE)";
    uint64_t bytes = 0;
    if (!ParseConfigSize(f[5].c_str() + 5, &bytes) || !IsValidRingBytes(bytes))
      return "bad ring size '" + f[5].substr(5) + "' (expected a power of two from 4K to 1G)";
    rule->ring_bytes = bytes;
  }
  return "";
}

// The address of `sa` as a pattern would name it (IPv4-mapped IPv6
// addresses as IPv4).  false: unknown.
bool Concrete(const struct sockaddr* sa, int* family, const uint8_t** addr, uint16_t* port) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const struct sockaddr_in*>(sa);
    *family = AF_INET;
    *addr = reinterpret_cast<const uint8_t*>(&in->sin_addr);
    *port = ntohs(in->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(sa);
    *addr = reinterpret_cast<const uint8_t*>(&in6->sin6_addr);
    *port = ntohs(in6->sin6_port);
    *family = AF_INET6;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      *family = AF_INET;
      *addr += 12;
    }
    return true;
  }
  return false;
}

bool Matches(const AddressPattern& p, const struct sockaddr* sa) {
  if (p.any_address && p.any_port) return true;
  int family = 0;
  const uint8_t* addr = nullptr;
  uint16_t port = 0;
  if (!Concrete(sa, &family, &addr, &port)) return false;
  if (!p.any_port && p.port != port) return false;
  if (p.any_address) return true;
  if (p.family != family) return false;
  return std::memcmp(p.address, addr, family == AF_INET ? 4 : 16) == 0;
}

bool RoleMatches(RuleRole want, RuleRole have) {
  return want == RuleRole::kAny || want == have;
}

// Reads the whole file; false with *why.
bool ReadRulesFile(const std::string& path, std::string* text, std::string* why, bool* missing) {
  int err = 0;
  *missing = false;
  if (sys::ReadSmallFile(path.c_str(), kMaxFileBytes, text, &err)) return true;
  *missing = err == ENOENT;
  *why = err == EFBIG ? "larger than 1 MiB" : std::strerror(err);
  return false;
}

}  // namespace

bool ParseRules(const std::string& text, const std::string& file, Rules* out,
                std::string* error) {
  Rules parsed;
  parsed.file = file;
  uint32_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    std::string problem;
    if (line.size() > kMaxLineBytes) {
      problem = "line longer than 1024 bytes";
    } else if (line.find('\0') != std::string::npos) {
      problem = "NUL byte in the line";
    } else {
      size_t hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      std::vector<std::string> fields = Fields(line);
      if (fields.empty()) continue;
      Rule rule;
      rule.line = line_no;
      problem = ParseLine(fields, &rule);
      if (problem.empty() && parsed.rules.size() >= kMaxRules)
        problem = "more than 4096 rules";
      if (problem.empty()) parsed.rules.push_back(std::move(rule));
    }
    if (!problem.empty()) {
      *error = file + ":" + std::to_string(line_no) + ": " + problem;
      *out = Rules{};
      return false;
    }
  }
  *out = std::move(parsed);
  return true;
}

const Rule* MatchRule(const Rules& rules, RuleRole role, const char* program,
                      const struct sockaddr* local, const struct sockaddr* remote) {
  for (const Rule& rule : rules.rules) {
    if (!RoleMatches(rule.role, role)) continue;
    if (rule.program != "*" && fnmatch(rule.program.c_str(), program ? program : "", 0) != 0)
      continue;
    if (!Matches(rule.local, local) || !Matches(rule.remote, remote)) continue;
    return &rule;
  }
  return nullptr;
}

const Rules& GetRules() {
  static const Rules* rules = [] {
    auto* r = new Rules();
    const Config& config = GetConfig();
    if (config.rules_file.empty()) return r;
    std::string text, why;
    bool missing = false;
    if (!ReadRulesFile(config.rules_file, &text, &why, &missing)) {
      if (!missing || config.rules_file_named) {
        std::fprintf(stderr, "vsocket: %s: cannot read the rules file (%s); no rules apply\n",
                     config.rules_file.c_str(), why.c_str());
      }
      return r;
    }
    std::string error;
    if (!ParseRules(text, config.rules_file, r, &error)) {
      std::fprintf(stderr, "vsocket: %s; the whole rules file is ignored\n", error.c_str());
    }
    return r;
  }();
  return *rules;
}

const Rule* RuleAtLine(uint32_t line) {
  if (line == 0) return nullptr;
  for (const Rule& rule : GetRules().rules) {
    if (rule.line == line) return &rule;
  }
  return nullptr;
}

}  // namespace vsocket
