// execve, execv, execvp, execvpe, execl, execlp, execle, fexecve, execveat.
//
// A new program image cannot use a shared-memory connection: the rings and
// the per-side state are mappings, and mappings do not survive exec.  So
// before the exec system call:
//  - every virtual socket of this process is released as close() would
//    release it: a process that forked (fork handlers counted it as one more
//    holder of each connection) and now execs no longer holds them, and the
//    peer sees FIN once the last real holder closes;
//  - a shared-memory socket that the new image inherits (no FD_CLOEXEC) is
//    replaced, at the same number, by a Unix socket whose peer is gone with
//    a reset pending: the new program's first read fails with ECONNRESET,
//    then reads return 0 and writes fail with EPIPE.  Without this it would
//    read the wake-up datagrams of the wait socket as if they were data.
//    Kernel-TCP connections are inherited unchanged and keep working.
// In a vfork() child, which shares the parent's memory, only the second step
// runs (the descriptor table is the child's own).  posix_spawn(), system()
// and popen() run exec inside libc where it cannot be seen: inherited
// shared-memory sockets are then not replaced (see docs/COMPATIBILITY.md).
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/descriptors.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "vsocket/real_libc.h"

extern char** environ;

namespace sys = vsocket::sys;
namespace real = vsocket::preload::real;
using vsocket::preload::Ours;

namespace {

bool IsUnixSocket(int fd) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  return sys::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
         domain == AF_UNIX;
}

void ReplaceWithResetSocket(int fd) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  char byte = 0;
  sys::send(sv[0], &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  sys::close(sv[1]);  // unread data: the kernel marks sv[0] ECONNRESET
  sys::dup3(sv[0], fd, 0);
  sys::close(sv[0]);
}

void PrepareForExec() {
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest < 0) return;
  int saved = errno;
  bool shared = vsocket::preload::SharesParentMemory();
  for (int fd = 0; fd <= highest; ++fd) {
    if (!Ours(fd) || !vsocket::LookupSocket(fd)) continue;
    if (!shared) vsocket::preload::ForgetDescriptor(fd);
    // A virtual socket's number names an AF_INET/AF_INET6 socket, or the
    // AF_UNIX wait socket of a shared-memory connection.
    int fd_flags = sys::fcntl(fd, F_GETFD);
    if (fd_flags >= 0 && !(fd_flags & FD_CLOEXEC) && IsUnixSocket(fd))
      ReplaceWithResetSocket(fd);
  }
  errno = saved;
}

// Collects execl-style arguments (up to the terminating null pointer) into
// `argv`, which must have room for `count` + 1 entries.
void CollectArgs(const char* first, va_list ap, char** argv, size_t count) {
  argv[0] = const_cast<char*>(first);
  for (size_t i = 1; i <= count; ++i) argv[i] = va_arg(ap, char*);
}

size_t CountArgs(const char* first, va_list ap) {
  size_t n = 0;
  if (first) {
    ++n;
    while (va_arg(ap, char*)) ++n;
  }
  return n;
}

}  // namespace

VSP_EXPORT int execve(const char* path, char* const argv[],
                      char* const envp[]) __THROW {
  PrepareForExec();
  return real::execve(path, argv, envp);
}

VSP_EXPORT int execv(const char* path, char* const argv[]) __THROW {
  PrepareForExec();
  return real::execve(path, argv, environ);
}

VSP_EXPORT int execvp(const char* file, char* const argv[]) __THROW {
  PrepareForExec();
  return real::execvp(file, argv);
}

VSP_EXPORT int execvpe(const char* file, char* const argv[],
                       char* const envp[]) __THROW {
  PrepareForExec();
  return real::execvpe(file, argv, envp);
}

VSP_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) __THROW {
  PrepareForExec();
  return real::fexecve(fd, argv, envp);
}

VSP_EXPORT int execveat(int dirfd, const char* path, char* const argv[],
                        char* const envp[], int flags) __THROW {
  PrepareForExec();
  return real::execveat(dirfd, path, argv, envp, flags);
}

// The execl family: no allocation (this may run in a vfork child).
VSP_EXPORT int execl(const char* path, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  size_t n = CountArgs(arg, ap);
  va_end(ap);
  char* argv[n + 1];
  va_start(ap, arg);
  if (n) CollectArgs(arg, ap, argv, n - 1);
  va_end(ap);
  argv[n] = nullptr;
  PrepareForExec();
  return real::execve(path, argv, environ);
}

VSP_EXPORT int execlp(const char* file, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  size_t n = CountArgs(arg, ap);
  va_end(ap);
  char* argv[n + 1];
  va_start(ap, arg);
  if (n) CollectArgs(arg, ap, argv, n - 1);
  va_end(ap);
  argv[n] = nullptr;
  PrepareForExec();
  return real::execvp(file, argv);
}

VSP_EXPORT int execle(const char* path, const char* arg, ...) __THROW {
  va_list ap;
  va_start(ap, arg);
  size_t n = CountArgs(arg, ap);
  char* const* envp = va_arg(ap, char* const*);  // after the null pointer
  va_end(ap);
  char* argv[n + 1];
  va_start(ap, arg);
  if (n) CollectArgs(arg, ap, argv, n - 1);
  va_end(ap);
  argv[n] = nullptr;
  PrepareForExec();
  return real::execve(path, argv, envp);
}
