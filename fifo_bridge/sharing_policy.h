// Which other users a process may share connection memory with
// (VSOCKET_SHARE_UIDS), read once at first use; immutable afterwards, any
// thread.  Off by default: a peer of another user then stays on kernel TCP
// with the reason uid_mismatch.
//
// VSOCKET_SHARE_UIDS is a comma list of user names or numeric uids.  Both
// ends must list each other: the client checks the uid of the process that
// takes its segment, the server the uid of the client that offered it
// (each from SO_PEERCRED of the hand-over connection, offer_hand_out.h).
// Malformed entries are logged once and ignored.
#ifndef VSOCKET_FIFO_BRIDGE_SHARING_POLICY_H_
#define VSOCKET_FIFO_BRIDGE_SHARING_POLICY_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace vsocket::fifo {

struct SharingPolicy {
  std::vector<uid_t> uids;  // other users allowed; empty: sharing is off
  bool enabled() const { return !uids.empty(); }
  // `uid` is this process's own effective uid, or listed.
  bool Allows(uid_t uid) const;
};

const SharingPolicy& GetSharingPolicy();

// Parses a VSOCKET_SHARE_UIDS value.  Names are looked up with
// getpwnam_r.  `bad` receives the entries that are neither.  Pure but for
// the user database.
SharingPolicy ParseSharingPolicy(const std::string& value,
                                 std::vector<std::string>* bad);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHARING_POLICY_H_
