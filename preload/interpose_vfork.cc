// vfork(): runs as fork().  A vfork child shares its parent's memory while
// it runs, which vsocket cannot work in: its exec could hand no connection
// over (a shared-memory connection reached the new image as a reset
// socket), and any vsocket code it ran (close_range, dup2, exec) acted on
// the parent's tables while the parent's other threads used them.  Moving
// every connection to kernel TCP before a real vfork() was tried first; it
// cost every spawning program (CPython's subprocess) its shared memory.
//
// As fork(), the child is an ordinary forked child: it holds the parent's
// connections as a fork does (base/after_fork.h), its dup2() and close()
// are its own, and its exec hands the connections it keeps to the new
// image (exec_handover.h), on shared memory.  POSIX leaves undefined what
// a vfork child may do besides exec and _exit, and glibc's vfork() may be
// a fork() elsewhere; a program that relied on the child writing into the
// parent's memory would see no such write (docs/COMPATIBILITY.md).  The
// cost is fork()'s copy of the page tables, paid per spawn.
//
// Threads: as fork().
#include <unistd.h>

#include "preload/preload_internal.h"

VSP_EXPORT pid_t vfork(void) { return fork(); }
