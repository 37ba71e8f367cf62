// Whether another process of this PID namespace has exited.
#ifndef VSOCKET_BASE_PROCESS_EXITED_H_
#define VSOCKET_BASE_PROCESS_EXITED_H_

#include <sys/types.h>

namespace vsocket::sys {

// True when `pid` has exited: no such process, or a zombie its parent has
// not reaped yet (kill(pid, 0) still succeeds on those, but a zombie holds
// no memory and no descriptor any more).  A reused pid looks alive.  pid 0
// or below counts as exited.  Any thread; one kill(2), then for a live pid
// an open, read and close of /proc/<pid>/stat (no /proc: alive).
// REQUIRES: `pid` is a number of this process's PID namespace.
bool ProcessExited(pid_t pid);

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_PROCESS_EXITED_H_
