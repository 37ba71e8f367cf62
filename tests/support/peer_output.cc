#include "peer_output.h"

#include <charconv>

namespace vsocket_test {

std::string Record::Get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "<missing>" : it->second;
}

int64_t Record::Int(const std::string& key) const {
  auto it = fields.find(key);
  if (it == fields.end()) return INT64_MIN;
  const std::string& v = it->second;
  int64_t out = 0;
  int base = v.starts_with("0x") ? 16 : 10;
  const char* begin = v.data() + (base == 16 ? 2 : 0);
  auto [end, ec] = std::from_chars(begin, v.data() + v.size(), out, base);
  if (ec != std::errc() || end != v.data() + v.size() || begin == end) {
    return INT64_MIN;
  }
  return out;
}

std::vector<Record> ParseRecords(std::string_view text) {
  std::vector<Record> records;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    Record rec;
    bool first = true;
    while (!line.empty()) {
      size_t sp = line.find(' ');
      std::string_view word = line.substr(0, sp);
      line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
      if (word.empty()) continue;
      if (first) {
        rec.tag = std::string(word);
        first = false;
        continue;
      }
      size_t eq = word.find('=');
      if (eq == std::string_view::npos) continue;
      rec.fields[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
    }
    if (!rec.tag.empty()) records.push_back(std::move(rec));
  }
  return records;
}

}  // namespace vsocket_test
