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

#include "preload/descriptors.h"
#include "vsocket/fallback_reason.h"

namespace vsocket::preload {

// true when every number of the connection behind `fd` now names kernel
// TCP, or `fd` is not a connected virtual socket of another transport
// (nothing to do); false when its transport could not move (nothing
// changed, or the connection was reset).
bool MoveConnectionToKernelTcp(int fd, FallbackReason reason);

// True when `fd` is a connection not on kernel TCP with bytes in its
// receive ring that it has not read.
bool HasUnreadRingBytes(int fd);

// Moves every connection among this process's numbers for which
// `include(fd)` is true, those with unread bytes first: the end that
// starts a move leaves its unread bytes for its peer to send again over
// TCP, and when both ends are in this process the other end is such a
// peer; an end that only follows would have to read them from the ring
// before its number could name TCP.  Nothing in a vfork child.
void MoveConnectionsToKernelTcp(bool (*include)(int fd), FallbackReason reason);

// Duplicate() (descriptors.h) for the dup family and F_DUPFD, with
// VSOCKET_STDIO_ON_TCP: a connection that would land on 0, 1 or 2 moves to
// kernel TCP first (dup2/dup3 onto it), or as soon as its copy exists,
// before the program has the new number (dup, F_DUPFD).  In a vfork child,
// Duplicate() alone.
int DuplicateKeepingStdioOnTcp(DupOp op, int oldfd, int target, int flags);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_MOVE_TO_TCP_H_
