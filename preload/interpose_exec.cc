// execve, execv, execvp, execvpe, execl, execlp, execle, fexecve, execveat.
//
// The rings and the per-side state are mappings, and mappings do not survive
// exec.  So before the exec system call (ExecExport, exec_handover.h):
//  - when the new image will be preloaded with this library (LD_PRELOAD in
//    the environment the call passes), each claimed shared-memory connection
//    and each listener that the new image inherits (a number without
//    FD_CLOEXEC) is handed over: its private descriptors stay open across
//    the exec and VSOCKET_INHERITED describes it to the new image's
//    interposer, which carries on with it at the same numbers;
//  - every other virtual socket of this process is released as close()
//    would release it: a process that forked (fork handlers counted it as one
//    more holder of each connection) and now execs no longer holds them, and
//    the peer sees FIN once the last real holder closes;
//  - a shared-memory socket that the new image inherits without a handover
//    (a new image that is not preloaded, an unclaimed offer that another
//    process still holds) is replaced, at the same number, by a Unix socket
//    whose peer is gone with a reset pending: the new program's first read
//    fails with ECONNRESET, then reads return 0 and writes fail with EPIPE.
//    Without this it would read the wake-up datagrams of the wait socket as
//    if they were data.  Kernel-TCP connections are inherited unchanged.
// If the exec call fails, handed-over sockets are exactly as before; released
// ones stay released.
// In a vfork() child, which shares the parent's memory, nothing is handed
// over or released, and the only step is the replacement by a reset socket
// (the descriptor table is the child's own); nothing allocates there.
// posix_spawn(), system() and popen() run exec inside libc where it cannot
// be seen: interpose_spawn.cc moves what they may pass on to kernel TCP
// before the call.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/exec_handover.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"

extern char** environ;

namespace real = vsocket::preload::real;
using vsocket::preload::ExecExport;

namespace {

// Collects execl-style arguments (up to the terminating null pointer) into
// `argv`, which must have room for `count` + 1 entries.
void CollectArgs(const char* first, va_list ap, char** argv, size_t count) {
  argv[0] = const_cast<char*>(first);
  for (size_t i = 1; i <= count; ++i) argv[i] = va_arg(ap, char*);
}

// After an exec call that returned (it failed): the handed-over sockets
// go back to this image.  Keeps errno.
int Finish(ExecExport* handover, int result) {
  handover->Abort();
  return result;
}

size_t CountArgs(const char* first, va_list ap) {
  size_t n = 0;
  if (first) {
    ++n;
    while (va_arg(ap, char*)) ++n;
  }
  return n;
}

// The execl family: `arg` and the rest of the list up to its null pointer
// become the argv handed to `exec` (real execve or execvpe), with environ,
// or with the envp that follows the null pointer if `envp_follows`
// (execle).  No allocation of its own: this may run in a vfork child, where
// ExecExport does not allocate either.  Returns only if the exec failed.
using ExecFn = int (*)(const char* path, char* const argv[], char* const envp[]);
int ExecList(ExecFn exec, const char* path, const char* arg, va_list ap,
             bool envp_follows) {
  va_list counting;
  va_copy(counting, ap);
  size_t n = CountArgs(arg, counting);
  char* const* envp = envp_follows ? va_arg(counting, char* const*) : environ;
  va_end(counting);
  char* argv[n + 1];
  if (n) CollectArgs(arg, ap, argv, n - 1);
  argv[n] = nullptr;
  ExecExport handover;
  handover.Prepare(envp);
  return Finish(&handover, exec(path, argv, handover.envp()));
}

}  // namespace

VSP_EXPORT int execve(const char* path, char* const argv[],
                      char* const envp[]) __THROW {
  ExecExport handover;
  handover.Prepare(envp);
  return Finish(&handover, real::execve(path, argv, handover.envp()));
}

VSP_EXPORT int execv(const char* path, char* const argv[]) __THROW {
  ExecExport handover;
  handover.Prepare(environ);
  return Finish(&handover, real::execve(path, argv, handover.envp()));
}

VSP_EXPORT int execvp(const char* file, char* const argv[]) __THROW {
  ExecExport handover;
  handover.Prepare(environ);
  return Finish(&handover, real::execvpe(file, argv, handover.envp()));
}

VSP_EXPORT int execvpe(const char* file, char* const argv[],
                       char* const envp[]) __THROW {
  ExecExport handover;
  handover.Prepare(envp);
  return Finish(&handover, real::execvpe(file, argv, handover.envp()));
}

VSP_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) __THROW {
  ExecExport handover;
  handover.Prepare(envp);
  return Finish(&handover, real::fexecve(fd, argv, handover.envp()));
}

VSP_EXPORT int execveat(int dirfd, const char* path, char* const argv[],
                        char* const envp[], int flags) __THROW {
  ExecExport handover;
  handover.Prepare(envp);
  return Finish(&handover,
                real::execveat(dirfd, path, argv, handover.envp(), flags));
}

VSP_EXPORT int execl(const char* path, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  int r = ExecList(real::execve, path, arg, ap, /*envp_follows=*/false);
  va_end(ap);
  return r;
}

VSP_EXPORT int execlp(const char* file, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  int r = ExecList(real::execvpe, file, arg, ap, /*envp_follows=*/false);
  va_end(ap);
  return r;
}

VSP_EXPORT int execle(const char* path, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  int r = ExecList(real::execve, path, arg, ap, /*envp_follows=*/true);
  va_end(ap);
  return r;
}
