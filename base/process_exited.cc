#include "base/process_exited.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/real_libc.h"

namespace vsocket::sys {

bool ProcessExited(pid_t pid) {
  if (pid <= 0) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  char buf[256];
  ssize_t n = sys::read(fd, buf, sizeof(buf) - 1);
  sys::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const char* paren = std::strrchr(buf, ')');
  if (paren == nullptr || paren[1] != ' ') return false;
  return paren[2] == 'Z' || paren[2] == 'X';
}

}  // namespace vsocket::sys
