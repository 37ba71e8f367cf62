// This process's pid, read once per process rather than by a getpid(2) per
// connection (the shared-memory setup writes it into each offer's header
// and each claim).
#ifndef VSOCKET_BASE_PROCESS_ID_H_
#define VSOCKET_BASE_PROCESS_ID_H_

#include <sys/types.h>

namespace vsocket::sys {

// getpid(), cached.  A forked child (fork(), or a raw clone without
// CLONE_VM: base/after_fork.h's recorded handlers) reads it again.  A child
// that shares this process's memory (vfork, clone(CLONE_VM)) runs no fork
// handler and sees its parent's pid: code that must tell such a child from
// its parent (preload's SharesParentMemory) calls getpid() itself.  Any
// thread; async-signal-safe once read.
pid_t ThisProcessId();

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_PROCESS_ID_H_
