// Which PID namespace this process is in.  Two processes that share a
// network namespace (so they find each other's abstract socket names) may
// still number processes differently: containers on the host network
// (Kubernetes hostNetwork, docker --network=host), or a test root made with
// unshare --pid.  A pid read from the other side, and any name built from
// a pid, means something only when both sides share this value.
#ifndef VSOCKET_BASE_PID_NAMESPACE_H_
#define VSOCKET_BASE_PID_NAMESPACE_H_

#include <cstdint>
#include <string>

namespace vsocket::sys {

// The inode of /proc/self/ns/pid, or 0 when it cannot be read (no /proc):
// then nothing can be told apart, and callers treat 0 as "the same as
// everyone's".  Read once per process; a forked child reads it again (a
// child of a parent that called unshare(CLONE_NEWPID) is in a new one).
// Any thread; the first call makes one stat(2).
uint64_t PidNamespaceId();
// PidNamespaceId() in hex, as names carry it ("vsk1/P/<tag>/<pid>",
// "live-<tag>").
std::string PidNamespaceTag();

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_PID_NAMESPACE_H_
