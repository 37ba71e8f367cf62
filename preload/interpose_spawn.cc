// posix_spawn, posix_spawnp, system, popen: glibc runs the new image's
// exec inside libc (from a child made with CLONE_VM|CLONE_VFORK), where no
// interposer sees it, so the exec hand-over (exec_handover.h) cannot run:
// the new image would get vsocket's wait socket at the connection's number
// (a stray NUL byte, ENOTCONN).  So before the call, every connection the
// new image may inherit moves to kernel TCP (reason `spawn`), and the new
// image, preloaded or not, gets the TCP socket, as without vsocket; the
// caller's own numbers name it too from then on.
//
// Which connections: those without FD_CLOEXEC; with posix_spawn file
// actions, every connection, as a dup2 action may give the child any of
// them (the actions object is opaque: vsocket does not read it).
//
// Threads: the calling thread moves; other threads' calls on a connection
// that moves finish on it under its transport's locks (move_to_tcp.h).
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>

#include "base/real_libc.h"
#include "preload/descriptors.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "vsocket/fallback_reason.h"

namespace vsocket::preload {
namespace {

bool Inherited(int fd) {
  int flags = sys::fcntl(fd, F_GETFD);
  return flags >= 0 && !(flags & FD_CLOEXEC);
}
bool Any(int) { return true; }

// `every`: move close-on-exec connections too.
void MoveInheritedConnections(bool every) {
  MoveConnectionsToKernelTcp(every ? &Any : &Inherited, FallbackReason::kSpawn);
}

}  // namespace
}  // namespace vsocket::preload

using vsocket::preload::MoveInheritedConnections;

namespace {

using SpawnFn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                        const posix_spawnattr_t*, char* const*, char* const*);

// posix_spawn and posix_spawnp: `real` caches libc's `name`.
int Spawn(std::atomic<SpawnFn>* real, const char* name, pid_t* pid, const char* file,
          const posix_spawn_file_actions_t* actions, const posix_spawnattr_t* attr,
          char* const argv[], char* const envp[]) {
  SpawnFn fn = vsocket::sys::NextSymbol(real, name);
  if (!fn) return ENOSYS;
  MoveInheritedConnections(actions != nullptr);
  return fn(pid, file, actions, attr, argv, envp);
}

}  // namespace

VSP_EXPORT int posix_spawn(pid_t* pid, const char* path,
                           const posix_spawn_file_actions_t* actions,
                           const posix_spawnattr_t* attr, char* const argv[],
                           char* const envp[]) {
  static std::atomic<SpawnFn> real{nullptr};
  return Spawn(&real, "posix_spawn", pid, path, actions, attr, argv, envp);
}

VSP_EXPORT int posix_spawnp(pid_t* pid, const char* file,
                            const posix_spawn_file_actions_t* actions,
                            const posix_spawnattr_t* attr, char* const argv[],
                            char* const envp[]) {
  static std::atomic<SpawnFn> real{nullptr};
  return Spawn(&real, "posix_spawnp", pid, file, actions, attr, argv, envp);
}

VSP_EXPORT int system(const char* command) {
  using Fn = int (*)(const char*);
  static std::atomic<Fn> real{nullptr};
  Fn fn = vsocket::sys::NextSymbol(&real, "system");
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  if (command != nullptr) MoveInheritedConnections(false);
  return fn(command);
}

VSP_EXPORT FILE* popen(const char* command, const char* type) {
  using Fn = FILE* (*)(const char*, const char*);
  static std::atomic<Fn> real{nullptr};
  Fn fn = vsocket::sys::NextSymbol(&real, "popen");
  if (!fn) {
    errno = ENOSYS;
    return nullptr;
  }
  MoveInheritedConnections(false);
  return fn(command, type);
}
