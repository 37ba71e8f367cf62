// SIGBUS on vsocket's shared files.  A mapping of a file under
// /dev/shm/vsocket-<uid>/ can lose its pages under the process that maps it:
// another process of the user truncates the file, or tmpfs cannot allocate
// a page of the sparse file the first time it is touched because /dev/shm
// filled up.  The kernel then raises SIGBUS (BUS_ADRERR) at the access.
//
// The guard lets the owner of each kind of file turn that into less than
// the death of the program.  Its handler finds the faulting address in
// /proc/self/maps; if the mapping is of a file under /dev/shm/vsocket-, it
// offers the mapping to each registered recoverer in turn, and the first
// that takes it has replaced the pages (the access is then retried on the
// new ones).  Any other SIGBUS goes to the handler that was installed
// before the guard (SIG_DFL: the default action, as without vsocket).
// Recoverers: a connection's segment (fifo_bridge/segment_fault_guard.h:
// the connection is reset) and the live statistics page
// (vsocket/live_stats.cc: publishing stops).
//
// Who installs: the owner of a kind of file, before its first mapping,
// through libc's sigaction (never the interposer's).  A handler the program
// installs later through the interposer (preload/interpose_signal.cc) keeps
// the guard in front of it; one installed later without the interposer
// (programs using the explicit API) replaces the guard, and a lost page is a
// SIGBUS again.
#ifndef VSOCKET_BASE_SHARED_FILE_FAULT_GUARD_H_
#define VSOCKET_BASE_SHARED_FILE_FAULT_GUARD_H_

#include <signal.h>

#include <atomic>
#include <cstdint>

namespace vsocket {

// One line of /proc/self/maps: [start, end) maps `path` from `offset`.
struct SharedFileMapping {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uint64_t offset = 0;
  const char* path = "";  // under /dev/shm/vsocket-
};

// Runs in the signal handler: async-signal-safe (system calls and stack
// memory only).  Returns true when it replaced the mapping's pages.
using SharedFileRecoverer = bool (*)(const SharedFileMapping& mapping);

// For recoverers (async-signal-safe): maps private zero pages over the whole
// mapping (MAP_FIXED), so that the faulting access is retried on them, and
// the first time `*said` is false writes `message` to stderr.  False if the
// mapping could not be replaced.
bool ReplaceWithZeroPages(const SharedFileMapping& mapping, std::atomic<bool>* said,
                          const char* message);

// Adds `recoverer` (once; at most 4 kinds) and installs the SIGBUS handler
// (once per process).  Thread-safe.
void GuardSharedFiles(SharedFileRecoverer recoverer);

// Async-signal-safe.  True when `info` is a fault inside a mapping that a
// recoverer took; false otherwise (nothing changed).
bool RecoverSharedFileFault(const siginfo_t* info);

}  // namespace vsocket

#endif  // VSOCKET_BASE_SHARED_FILE_FAULT_GUARD_H_
