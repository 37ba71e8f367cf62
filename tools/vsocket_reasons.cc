// vsocket-reasons: the fallback reasons of this build (the names
// VSOCKET_STATS, vsocket-stat, the log and vsocket_fallback_reason() use)
// with what each means, read from the registry.  A developer's tool: its
// --markdown output is the README's table, which
// tests/unit/reason_table_test.cc holds to it.
//
//   vsocket-reasons [--markdown]
//
// Exit status: 0; 2 on a usage error.
#include <cstdio>
#include <cstring>

#include "tools/reason_table.h"

int main(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else {
      std::fprintf(stderr, "usage: vsocket-reasons [--markdown]\n");
      return std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  auto reasons = vsocket_reasons::RegisteredReasons();
  if (markdown) {
    std::fputs(vsocket_reasons::MarkdownTable(reasons).c_str(), stdout);
  } else {
    for (const auto& r : reasons) std::printf("%-24s %s\n", r.name.c_str(), r.meaning.c_str());
  }
  return 0;
}
