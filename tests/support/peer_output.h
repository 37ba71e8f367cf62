// Parsing of the line protocol vsocket_testpeer prints on stdout:
//   TAG key=value key=value ...
// Values never contain spaces; an empty value ("reason=") is legal.
#ifndef VSOCKET_TESTS_SUPPORT_PEER_OUTPUT_H_
#define VSOCKET_TESTS_SUPPORT_PEER_OUTPUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace vsocket_test {

struct Record {
  std::string tag;
  std::map<std::string, std::string> fields;

  bool Has(const std::string& key) const { return fields.count(key) != 0; }
  // The value, or "<missing>" so that a comparison against an expected value
  // fails with a readable message.
  std::string Get(const std::string& key) const;
  // The value as an integer, or INT64_MIN if missing or not a number.
  int64_t Int(const std::string& key) const;
};

std::vector<Record> ParseRecords(std::string_view text);

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_PEER_OUTPUT_H_
