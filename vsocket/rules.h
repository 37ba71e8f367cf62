// The rules file (VSOCKET_CONFIG, default /etc/vsocket.conf; grammar in
// vsocket(7)): per program, role and address, which transport policy a
// connection gets and the size of its shared-memory ring.
//
//   # POLICY  ROLE    PROGRAM       LOCAL        REMOTE         [ring=SIZE]
//   tcp       client  *             *:*          10.0.0.5:6379
//   shm       server  redis-server  *:6379       *:*            ring=4M
//   auto      *       *             *            *
//
// POLICY: auto, tcp, or a transport's name (checked when a rule is used:
// a name this build lacks gives transport_unavailable).  ROLE: client
// (connect), server (listen/accept) or *.  PROGRAM: a glob (fnmatch) on the
// program's short name.  LOCAL, REMOTE: ADDR:PORT with ADDR an IPv4
// address, [IPv6] or *, PORT a number or *; a bare * is *:*.  The first
// rule that matches decides; no match: VSOCKET_TRANSPORT as usual.
//
// A malformed file is ignored as a whole (one error line on stderr naming
// the file, the line and the problem); a missing default file is silent.
// Pure parsing and matching here; path_selection.cc applies the result.
#ifndef VSOCKET_VSOCKET_RULES_H_
#define VSOCKET_VSOCKET_RULES_H_

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vsocket/config.h"

namespace vsocket {

enum class RuleRole { kAny, kClient, kServer };

struct AddressPattern {
  bool any_address = true;
  int family = 0;         // AF_INET or AF_INET6 when !any_address
  uint8_t address[16] = {};
  bool any_port = true;
  uint16_t port = 0;      // host order, when !any_port
};

struct Rule {
  uint32_t line = 0;                 // 1-based line in the file
  TransportPolicy policy = TransportPolicy::kAuto;
  std::string transport;             // for kNamed
  RuleRole role = RuleRole::kAny;
  std::string program;               // glob
  AddressPattern local, remote;
  uint64_t ring_bytes = 0;           // 0: VSOCKET_RING_SIZE
};

struct Rules {
  std::string file;        // where they came from ("" : no file)
  std::vector<Rule> rules;
};

// Parses the text of a rules file named `file`.  true with *out, or false
// with *error set to "FILE:LINE: problem" (no newline) and *out empty.
bool ParseRules(const std::string& text, const std::string& file, Rules* out,
                std::string* error);

// The first rule for a connection of `role` in `program` between `local`
// and `remote` (either may be null: unknown, which only * matches), or
// null.
const Rule* MatchRule(const Rules& rules, RuleRole role, const char* program,
                      const struct sockaddr* local, const struct sockaddr* remote);

// The rule of this process's rules file at `line`, or null.
const Rule* RuleAtLine(uint32_t line);

// This process's rules, read once at first use from GetConfig().rules_file
// (stderr gets the one line of a malformed file, or of a named file that
// cannot be read).  Safe from any thread.
const Rules& GetRules();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_RULES_H_
