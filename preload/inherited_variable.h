// The text grammar of VSOCKET_INHERITED (preload/exec_handover.h), parsed
// without touching a descriptor: the new image checks the syntax here and
// the descriptors themselves afterwards (exec_adopt.cc).  Everything parsed
// here is untrusted (any program may set the variable).
#ifndef VSOCKET_PRELOAD_INHERITED_VARIABLE_H_
#define VSOCKET_PRELOAD_INHERITED_VARIABLE_H_

#include <string>
#include <vector>

namespace vsocket::preload {

// `text` cut at every `sep` (an empty text gives one empty part).
std::vector<std::string> SplitInherited(const std::string& text, char sep);

// A descriptor number (vsocket/descriptor_number.h), or "-1" when
// `allow_none`.  False otherwise.
bool ParseInheritedFd(const std::string& text, bool allow_none, int* fd);

// "<fd>[+<fd>...]": at least one number, all distinct.  *fds gets them in
// order; false (and *fds unspecified) for anything else.
bool ParseInheritedFdList(const std::string& text, std::vector<int>* fds);

// One entry: "<kind>,<field>,...,<numbers>".  `fields` are those between
// the kind and the last one (empty when the entry has fewer than two).
struct InheritedEntry {
  std::string kind;  // "listen" or a provider's name ("" for an empty entry)
  std::vector<std::string> fields;
  std::string numbers;  // the last field, unparsed ("" if none)
  size_t field_count = 0;  // how many comma-separated fields the entry had
};

// "1;<entry>;<entry>...".  False for another version (nothing is parsed);
// otherwise *entries gets every entry, malformed or not, in order.
bool ParseInheritedVariable(const std::string& text,
                            std::vector<InheritedEntry>* entries);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_INHERITED_VARIABLE_H_
