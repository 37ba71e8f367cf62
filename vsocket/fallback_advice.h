// What a user can do about a fallback reason, for the exit statistics
// (VSOCKET_STATS) and vsocket-stat.  Header-only and keyed by the reason's
// name, so that vsocket-stat, which links no vsocket library, reads the
// same text.  Pure; any thread.
#ifndef VSOCKET_VSOCKET_FALLBACK_ADVICE_H_
#define VSOCKET_VSOCKET_FALLBACK_ADVICE_H_

#include <string_view>

namespace vsocket {

// nullptr when there is nothing to turn on (the reason is the program's or
// the peer's: a plain TCP peer, a short connection, ...).
inline const char* FallbackReasonAdvice(std::string_view reason) {
  if (reason == "uid_mismatch")
    return "the peer runs as another user; to share memory with it, list each "
           "other's user on both ends: VSOCKET_SHARE_UIDS=<user> "
           "(docs/PROTOCOL.md, \"Sealed offers and sharing with other users\")";
  if (reason == "fd_limit")
    return "the descriptor budget is full; raise the hard RLIMIT_NOFILE or "
           "VSOCKET_FD_SHARE (docs/COMPATIBILITY.md)";
  return nullptr;
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_FALLBACK_ADVICE_H_
