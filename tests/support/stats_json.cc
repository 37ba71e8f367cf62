#include "stats_json.h"

#include <cctype>
#include <cstring>
#include <cstdlib>

namespace vsocket_test {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  bool ParseDocument(JsonValue* out) {
    if (!Value(out, 0)) return false;
    SkipSpace();
    return pos_ == s_.size();
  }
  // One value at the start of the text; what follows it is ignored.
  bool ParsePrefix(JsonValue* out) { return Value(out, 0); }

 private:
  static constexpr int kMaxDepth = 32;

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'u':  // keep the escape verbatim; stats keys are ASCII
          if (pos_ + 4 > s_.size()) return false;
          out->append("\\u").append(s_.substr(pos_, 4));
          pos_ += 4;
          break;
        default: out->push_back(e);
      }
    }
    return false;
  }

  bool Number(double* out) {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && std::strchr("+-0123456789.eE", s_[pos_])) ++pos_;
    if (start == pos_) return false;
    std::string num(s_.substr(start, pos_ - start));
    char* end = nullptr;
    *out = std::strtod(num.c_str(), &end);
    return end == num.c_str() + num.size();
  }

  bool Value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '{') {
      out->kind = JsonValue::Kind::kObject;
      ++pos_;
      if (Eat('}')) return true;
      do {
        std::string key;
        if (!String(&key) || !Eat(':')) return false;
        if (!Value(&out->object[key], depth + 1)) return false;
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      out->kind = JsonValue::Kind::kArray;
      ++pos_;
      if (Eat(']')) return true;
      do {
        out->array.emplace_back();
        if (!Value(&out->array.back(), depth + 1)) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      out->kind = JsonValue::Kind::kString;
      return String(&out->string);
    }
    if (Literal("true")) {
      out->kind = JsonValue::Kind::kBool;
      out->boolean = true;
      return true;
    }
    if (Literal("false")) {
      out->kind = JsonValue::Kind::kBool;
      return true;
    }
    if (Literal("null")) return true;
    out->kind = JsonValue::Kind::kNumber;
    return Number(&out->number);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(std::initializer_list<std::string_view> path) const {
  const JsonValue* v = this;
  for (std::string_view key : path) {
    if (v->kind != Kind::kObject) return nullptr;
    auto it = v->object.find(std::string(key));
    if (it == v->object.end()) return nullptr;
    v = &it->second;
  }
  return v;
}

std::optional<JsonValue> ParseJson(std::string_view text) {
  JsonValue v;
  if (!Parser(text).ParseDocument(&v)) return std::nullopt;
  return v;
}

std::vector<JsonValue> StatsLines(std::string_view stderr_text) {
  std::vector<JsonValue> lines;
  while (!stderr_text.empty()) {
    size_t nl = stderr_text.find('\n');
    std::string_view line = stderr_text.substr(0, nl);
    stderr_text = nl == std::string_view::npos ? std::string_view()
                                               : stderr_text.substr(nl + 1);
    size_t start = line.find("{\"pid\":");
    if (start == std::string_view::npos) continue;
    JsonValue v;
    if (Parser(line.substr(start)).ParsePrefix(&v) &&
        v.Find({"transports"}) != nullptr) {
      lines.push_back(std::move(v));
    }
  }
  return lines;
}

std::optional<JsonValue> FindStatsLine(std::string_view stderr_text) {
  std::vector<JsonValue> lines = StatsLines(stderr_text);
  if (lines.empty()) return std::nullopt;
  return std::move(lines.back());
}

int64_t StatsNumber(const JsonValue& stats,
                    std::initializer_list<std::string_view> path) {
  const JsonValue* v = stats.Find(path);
  if (v == nullptr || v->kind != JsonValue::Kind::kNumber) return -1;
  return static_cast<int64_t>(v->number);
}

}  // namespace vsocket_test
