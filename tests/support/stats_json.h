// Reading the VSOCKET_STATS line a vsocket process prints to stderr at exit:
//   {"pid":123,"transports":{"shm":{"connections":2,...},...},
//    "fallback_reasons":{"peer_not_vsocket":1}}
// A minimal JSON reader (objects, arrays, strings, numbers, literals) is
// enough for that shape; it is not a general-purpose parser.
#ifndef VSOCKET_TESTS_SUPPORT_STATS_JSON_H_
#define VSOCKET_TESTS_SUPPORT_STATS_JSON_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vsocket_test {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  // Follows object keys; nullptr if any step is missing or not an object.
  const JsonValue* Find(std::initializer_list<std::string_view> path) const;
};

// Parses one JSON document; nullopt on any syntax error or trailing garbage.
std::optional<JsonValue> ParseJson(std::string_view text);

// Every stats line in a process tree's stderr (one per process), in order:
// from each line's first `{"pid":` on, the JSON object there if it has a
// "transports" member.  Text before or after the object on its line is
// ignored (another process's unfinished output may share the line).
std::vector<JsonValue> StatsLines(std::string_view stderr_text);

// The last of StatsLines(); nullopt if there is none.
std::optional<JsonValue> FindStatsLine(std::string_view stderr_text);

// Number at `path` as an integer, or -1 if absent / not a number.
int64_t StatsNumber(const JsonValue& stats,
                    std::initializer_list<std::string_view> path);

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_STATS_JSON_H_
