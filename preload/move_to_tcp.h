// Moving a connected virtual socket onto its kernel TCP connection, from the
// interposer's side: the transport moves the stream
// (Transport::MoveToKernelTcp), and every number of the connection in this
// process is made to name the TCP socket (the transport moves only its own
// user_fd()).  Used where code that bypasses vsocket will use the numbers:
// an exec into an image that is not preloaded, stdio (descriptors 0-2,
// fdopen), and when vsocket's own descriptors would exceed RLIMIT_NOFILE.
//
// Threads: any thread; never holds the descriptor table's mutex while the
// transport moves.  REQUIRES: not in a vfork child (SharesParentMemory()).
#ifndef VSOCKET_PRELOAD_MOVE_TO_TCP_H_
#define VSOCKET_PRELOAD_MOVE_TO_TCP_H_

#include "vsocket/fallback_reason.h"

namespace vsocket::preload {

// true when every number of the connection behind `fd` now names kernel
// TCP, or `fd` is not a connected virtual socket of another transport
// (nothing to do); false when its transport could not move (nothing
// changed, or the connection was reset).
bool MoveConnectionToKernelTcp(int fd, FallbackReason reason);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_MOVE_TO_TCP_H_
