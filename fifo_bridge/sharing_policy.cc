#include "fifo_bridge/sharing_policy.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "vsocket/log.h"

namespace vsocket::fifo {
namespace {

bool ParseUid(const std::string& word, uid_t* uid) {
  if (word.empty()) return false;
  if (std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    errno = 0;
    unsigned long v = std::strtoul(word.c_str(), nullptr, 10);
    if (errno != 0 || v >= static_cast<unsigned long>(static_cast<uid_t>(-1))) return false;
    *uid = static_cast<uid_t>(v);
    return true;
  }
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (getpwnam_r(word.c_str(), &pw, buf, sizeof(buf), &found) != 0 || !found)
    return false;
  *uid = found->pw_uid;
  return true;
}

}  // namespace

bool SharingPolicy::Allows(uid_t uid) const {
  return uid == ::geteuid() || std::find(uids.begin(), uids.end(), uid) != uids.end();
}

SharingPolicy ParseSharingPolicy(const std::string& value,
                                 std::vector<std::string>* bad) {
  SharingPolicy policy;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string word = value.substr(start, comma - start);
    word.erase(0, word.find_first_not_of(" \t"));
    word.erase(word.find_last_not_of(" \t") + 1);
    uid_t uid;
    if (!word.empty()) {
      if (ParseUid(word, &uid)) {
        policy.uids.push_back(uid);
      } else {
        bad->push_back(word);
      }
    }
    start = comma + 1;
  }
  return policy;
}

const SharingPolicy& GetSharingPolicy() {
  static const SharingPolicy* policy = [] {
    const char* value = std::getenv("VSOCKET_SHARE_UIDS");
    std::vector<std::string> bad;
    auto* p = new SharingPolicy(ParseSharingPolicy(value ? value : "", &bad));
    for (const std::string& word : bad) {
      VSOCKET_LOG(kWarn, "VSOCKET_SHARE_UIDS: '%s' is neither a uid nor a user: ignored",
                  word.c_str());
    }
    return p;
  }();
  return *policy;
}

}  // namespace vsocket::fifo
