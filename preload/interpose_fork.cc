// fork: runs the child's vsocket work that must not run inside a fork
// handler (base/after_fork.h) as soon as the real fork() returns in the
// child, before the program's own code: chiefly the liveness watcher's
// thread, which notices a shared-memory peer's death and a peer's hang-up
// while the child sleeps in a kernel wait (a fork-per-connection server's
// child blocked in read()).  The fork handlers themselves (the socket
// table's holder counts, the locks reset in the child) run inside the real
// fork() as before.
//
// vfork() runs as this fork() (interpose_vfork.cc).  _Fork() and a raw
// clone() run no fork handlers: there is then nothing to resume.
#include <sys/types.h>
#include <unistd.h>

#include "base/after_fork.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"

VSP_EXPORT pid_t fork(void) {
  pid_t pid = vsocket::preload::real::fork();
  if (pid == 0) vsocket::sys::RunForkedChildWork();
  return pid;
}
