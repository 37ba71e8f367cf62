#include "tools/reason_table.h"

#include "vsocket/fallback_reason.h"
#include "vsocket/provider_registry.h"

namespace vsocket_reasons {

std::vector<Reason> RegisteredReasons() {
  vsocket::Providers();  // installing them registers their reasons
  std::vector<Reason> out;
  const int count = vsocket::FallbackReasonCount();
  for (int r = 1; r < count; ++r) {
    auto reason = static_cast<vsocket::FallbackReason>(r);
    out.push_back({vsocket::FallbackReasonName(reason), vsocket::FallbackReasonMeaning(reason)});
  }
  return out;
}

std::string MarkdownTable(const std::vector<Reason>& reasons) {
  std::string out = "| reason | meaning |\n|---|---|\n";
  for (const Reason& r : reasons) out += "| `" + r.name + "` | " + r.meaning + " |\n";
  return out;
}

}  // namespace vsocket_reasons
