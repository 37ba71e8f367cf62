// Maps descriptor numbers to the VirtualSocket they refer to.  Several numbers
// may map to one socket (dup).  A descriptor with no entry is not ours and is
// passed to libc untouched.
//
// Thread safety: all functions may be called concurrently.  Lookups take a
// shared lock and return a reference-counted handle, so a socket closed by
// one thread stays valid for another thread that is inside a call on it.
// fork(): the child's table is consistent, and each socket is told once that
// one more process holds it.
#ifndef VSOCKET_VSOCKET_SOCKET_TABLE_H_
#define VSOCKET_VSOCKET_SOCKET_TABLE_H_

#include <memory>

#include "vsocket/virtual_socket.h"

namespace vsocket {

std::shared_ptr<VirtualSocket> LookupSocket(int fd);
// Registers `fd` (replacing any stale entry).
void RegisterSocket(int fd, std::shared_ptr<VirtualSocket> socket);
// Removes and returns the entry for `fd` (nullptr if none).
std::shared_ptr<VirtualSocket> UnregisterSocket(int fd);

// Lock-free pre-check for hot paths (read/write/close of every descriptor
// under LD_PRELOAD): false means `fd` is certainly not a virtual socket.
bool MaybeVirtualFd(int fd);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_SOCKET_TABLE_H_
