// SIGBUS on a shared segment: a mapping of a /dev/shm file can lose its
// pages under the process that maps it -- the peer (same user) truncates the
// file, or tmpfs cannot allocate a page of the sparse file the first time it
// is touched because /dev/shm filled up after the connection started.  The
// kernel then raises SIGBUS (BUS_ADRERR) at the access.  The guard turns
// that into a reset of that one connection instead of the death of the
// program:
//
//  - the handler finds the faulting address in /proc/self/maps; if it lies
//    in a mapping of /dev/shm/vsocket-* at offset 0 (a segment), it maps
//    private zero pages over the whole segment (MAP_FIXED), sets RESET in
//    both ring control blocks and the claim word to CLAIMED, and returns:
//    the access is retried on the new pages and the connection's next call
//    returns ECONNRESET (the ring code already treats RESET and impossible
//    indices so; ShmTransport::ReadOnce re-checks RESET after copying, so
//    zeros are never delivered as data -- except through an in-place view
//    (vsocket_recv_inplace) the program holds while the pages go);
//  - any other SIGBUS goes to the handler that was installed before the
//    guard (SIG_DFL: the default action, as without vsocket).
//
// Who installs: ShmSegment, at the first mapping of a segment, through
// libc's sigaction (never the interposer's).  A handler the program installs
// later through the interposer (preload/interpose_signal.cc) keeps the guard
// in front of it; one installed later without the interposer (programs using
// the explicit API) replaces the guard, and a truncation is a SIGBUS again.
#ifndef VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_
#define VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_

#include <signal.h>

namespace vsocket::fifo {

// Installs the SIGBUS handler once per process; later calls return at once.
// Thread-safe.
void InstallSegmentFaultGuard();

// Async-signal-safe (system calls and stack memory only).  True when `info`
// is a fault inside a segment mapping, which is then replaced as described
// above; false otherwise (nothing changed).
bool RecoverSegmentFault(const siginfo_t* info);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_
