// _exit, _Exit: sends a transport accepted but still holds back (toe's and
// RDMA's corked bursts, vsocket/kernel_wait.h) go to the kernel first, as
// exit() does through its atexit handlers.  A forked child that writes a
// reply in several send() calls and leaves with _exit() -- the usual end of
// a fork-per-connection server's child -- then loses nothing.
//
// What goes is what the kernel takes at once (a non-blocking flush): bytes
// a full socket cannot take yet, a fatal signal, SIGKILL and a raw
// exit_group system call still lose the held tail (docs/COMPATIBILITY.md).
// A vfork()ed child (it shares its parent's memory) flushes nothing: the
// held bytes are the parent's, and the parent sends them.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "preload/descriptors.h"
#include "preload/preload_internal.h"
#include "vsocket/kernel_wait.h"

namespace {

[[noreturn]] void ExitNow(int status) {
  if (!vsocket::preload::SharesParentMemory()) vsocket::BeforeWait();
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace

VSP_EXPORT void _exit(int status) { ExitNow(status); }

VSP_EXPORT void _Exit(int status) { ExitNow(status); }
