// The fallback reasons a library build knows, read from the registry
// (vsocket/fallback_reason.h) once every provider of the build is
// installed: the core's reasons, then each backend's in provider order.
// vsocket-reasons prints them, and tests/unit/reason_table_test.cc holds
// the README's table to them.  Any thread.
#ifndef VSOCKET_TOOLS_REASON_TABLE_H_
#define VSOCKET_TOOLS_REASON_TABLE_H_

#include <string>
#include <vector>

namespace vsocket_reasons {

struct Reason {
  std::string name;
  std::string meaning;
};

// Installs the providers (which register their reasons) on first use.
std::vector<Reason> RegisteredReasons();

// The README's table: a header row, then "| `name` | meaning |" per
// reason, each line ending in '\n'.
std::string MarkdownTable(const std::vector<Reason>& reasons);

}  // namespace vsocket_reasons

#endif  // VSOCKET_TOOLS_REASON_TABLE_H_
