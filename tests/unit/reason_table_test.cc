// The registry of fallback reason names (vsocket/fallback_reason.h) as a
// library build fills it, and the README's table made from it
// (tools/reason_table.h): the table in README.md must be what
// `vsocket-reasons --markdown` prints, so that it cannot go stale.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tools/reason_table.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/live_stats_layout.h"

namespace {

using vsocket::FallbackReason;
using vsocket_reasons::Reason;

// The lines of README.md's table, from its header row to its last row.
std::vector<std::string> ReadmeTable() {
  std::ifstream in(VSOCKET_SOURCE_DIR "/README.md");
  std::vector<std::string> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "| reason | meaning |") inside = true;
    if (!inside) continue;
    if (line.empty() || line[0] != '|') break;
    rows.push_back(line);
  }
  return rows;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(ReasonTable, NamesAreUniqueShortAndExplained) {
  std::vector<Reason> reasons = vsocket_reasons::RegisteredReasons();
  ASSERT_LT(reasons.size(), static_cast<size_t>(vsocket::kMaxFallbackReasons));
  std::set<std::string> seen;
  for (const Reason& r : reasons) {
    EXPECT_TRUE(seen.insert(r.name).second) << r.name << " twice";
    EXPECT_FALSE(r.name.empty());
    EXPECT_LT(r.name.size(), static_cast<size_t>(vsocket::kLiveNameBytes)) << r.name;
    EXPECT_EQ(r.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos)
        << r.name;
    EXPECT_FALSE(r.meaning.empty()) << r.name;
    EXPECT_EQ(r.meaning.find('|'), std::string::npos) << r.name << ": breaks the table";
  }
}

TEST(ReasonTable, RegisteringANameAgainGivesItsReason) {
  vsocket_reasons::RegisteredReasons();
  EXPECT_EQ(vsocket::RegisterFallbackReason("peer_not_vsocket", "other words"),
            FallbackReason::kPeerNotVsocket);
  const int count = vsocket::FallbackReasonCount();
  ASSERT_GT(count, static_cast<int>(FallbackReason::kFirstRegistered))
      << "the shared-memory backend registers reasons";
  auto last = static_cast<FallbackReason>(count - 1);
  EXPECT_EQ(vsocket::RegisterFallbackReason(vsocket::FallbackReasonName(last), "again"), last);
  EXPECT_EQ(vsocket::FallbackReasonCount(), count);
  EXPECT_STREQ(vsocket::FallbackReasonName(FallbackReason::kNone), "");
  EXPECT_STREQ(vsocket::FallbackReasonName(static_cast<FallbackReason>(count)), "unknown");
  EXPECT_STREQ(vsocket::FallbackReasonMeaning(static_cast<FallbackReason>(count)), "");
}

// Regenerate the table with: build/tools/vsocket-reasons --markdown
TEST(ReasonTable, ReadmeTableIsTheRegistrys) {
  std::vector<std::string> readme = ReadmeTable();
  ASSERT_FALSE(readme.empty()) << "README.md has no \"| reason | meaning |\" table";
  std::vector<std::string> built =
      Lines(vsocket_reasons::MarkdownTable(vsocket_reasons::RegisteredReasons()));
  std::string not_built = VSOCKET_BACKENDS_NOT_BUILT;
  if (not_built.empty()) {
    // Every backend is built: the table is the registry's, row for row.
    for (size_t i = 0; i < std::max(readme.size(), built.size()); ++i) {
      std::string has = i < readme.size() ? readme[i] : "(the table ends)";
      std::string wants = i < built.size() ? built[i] : "(the table ends)";
      if (has == wants) continue;
      ADD_FAILURE() << "README.md's reason table, row " << i + 1 << ":\n  " << has
                    << "\nthe registry's:\n  " << wants
                    << "\npaste the output of build/tools/vsocket-reasons --markdown";
      return;
    }
    return;
  }
  // Backends whose dependencies this build lacks (not_built) register
  // nothing here: the README must still hold every row of the others, in
  // their order.
  size_t at = 0;
  for (const std::string& row : built) {
    while (at < readme.size() && readme[at] != row) ++at;
    EXPECT_LT(at, readme.size()) << "README.md lacks or misorders: " << row
                                 << " (backends not built: " << not_built << ")";
    if (at == readme.size()) return;
  }
}

}  // namespace
