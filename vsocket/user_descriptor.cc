#include "vsocket/user_descriptor.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "vsocket/log.h"
#include "base/real_libc.h"

namespace vsocket {

int DuplicateAside(int fd) {
  int copy = sys::DupPrivate(fd);
  if (copy < 0) copy = sys::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  return copy;
}

int InstallAtUserNumber(int from, int user_fd) {
  int fd_flags = sys::fcntl(user_fd, F_GETFD);
  if (sys::dup3(from, user_fd, (fd_flags >= 0 && (fd_flags & FD_CLOEXEC)) ? O_CLOEXEC : 0) < 0) {
    int saved = errno;
    VSOCKET_LOG(kWarn, "dup3 onto the application's descriptor failed: %s",
                strerror(saved));
    errno = saved;
    return -1;
  }
  sys::close(from);
  return 0;
}

}  // namespace vsocket
