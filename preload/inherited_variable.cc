#include "preload/inherited_variable.h"

#include "vsocket/descriptor_number.h"

namespace vsocket::preload {

std::vector<std::string> SplitInherited(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

bool ParseInheritedFd(const std::string& text, bool allow_none, int* fd) {
  if (allow_none && text == "-1") {
    *fd = -1;
    return true;
  }
  return ParseDescriptorNumber(text, fd);
}

bool ParseInheritedFdList(const std::string& text, std::vector<int>* fds) {
  fds->clear();
  for (const std::string& part : SplitInherited(text, '+')) {
    int fd;
    if (!ParseInheritedFd(part, false, &fd)) return false;
    for (int seen : *fds) {
      if (seen == fd) return false;
    }
    fds->push_back(fd);
  }
  return !fds->empty();
}

bool ParseInheritedVariable(const std::string& text,
                            std::vector<InheritedEntry>* entries) {
  std::vector<std::string> parts = SplitInherited(text, ';');
  if (parts.front() != "1") return false;
  entries->clear();
  for (size_t i = 1; i < parts.size(); ++i) {
    std::vector<std::string> f = SplitInherited(parts[i], ',');
    InheritedEntry entry;
    entry.kind = f.front();
    entry.field_count = f.size();
    if (f.size() >= 2) {
      entry.fields.assign(f.begin() + 1, f.end() - 1);
      entry.numbers = f.back();
    }
    entries->push_back(std::move(entry));
  }
  return true;
}

}  // namespace vsocket::preload
