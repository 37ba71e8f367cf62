// fcntl, fcntl64, ioctl, getsockopt, setsockopt, getsockname, getpeername.
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "preload/descriptors.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "base/real_libc.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
using vsocket::preload::DupOp;
using vsocket::preload::Ours;

namespace {

int Fcntl(int fd, int cmd, long arg) {
  if (!Ours(fd)) return sys::fcntl(fd, cmd, arg);
  switch (cmd) {
    case F_DUPFD:
      return vsocket::preload::DuplicateKeepingStdioOnTcp(
          DupOp::kDupFd, fd, static_cast<int>(arg), 0);
    case F_DUPFD_CLOEXEC:
      return vsocket::preload::DuplicateKeepingStdioOnTcp(
          DupOp::kDupFdCloexec, fd, static_cast<int>(arg), 0);
    default:
      // O_NONBLOCK through F_GETFL/F_SETFL; F_GETFD/F_SETFD and the rest
      // act on the descriptor itself.
      return vsocket_fcntl(fd, cmd, arg);
  }
}

}  // namespace

// The third argument is an int, a long or a pointer depending on `cmd`; all
// of them travel in one integer register, so reading it as a long and
// passing it on as one is what libc itself does.
VSP_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return Fcntl(fd, cmd, arg);
}

VSP_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return Fcntl(fd, cmd, arg);
}

VSP_EXPORT int ioctl(int fd, unsigned long request, ...) __THROW {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (!Ours(fd)) return sys::ioctl(fd, request, arg);
  return vsocket_ioctl(fd, request, arg);
}

VSP_EXPORT int getsockopt(int fd, int level, int name, void* val,
                          socklen_t* len) __THROW {
  if (!Ours(fd)) return sys::getsockopt(fd, level, name, val, len);
  return vsocket_getsockopt(fd, level, name, val, len);
}

VSP_EXPORT int setsockopt(int fd, int level, int name, const void* val,
                          socklen_t len) __THROW {
  if (!Ours(fd)) return sys::setsockopt(fd, level, name, val, len);
  if (level == SOL_SOCKET && name == SO_ZEROCOPY && val && len >= sizeof(int) &&
      *static_cast<const int*>(val) != 0) {
    // MSG_ZEROCOPY completions come only from kernel TCP: a connection on
    // another path moves there first, whose every number then names the
    // TCP socket (a program waiting for completions would wait forever).
    vsocket::preload::MoveConnectionToKernelTcp(fd, vsocket::FallbackReason::kZeroCopy);
  }
  return vsocket_setsockopt(fd, level, name, val, len);
}

VSP_EXPORT int getsockname(int fd, struct sockaddr* addr, socklen_t* len) __THROW {
  if (!Ours(fd)) return sys::getsockname(fd, addr, len);
  return vsocket_getsockname(fd, addr, len);
}

VSP_EXPORT int getpeername(int fd, struct sockaddr* addr, socklen_t* len) __THROW {
  if (!Ours(fd)) return sys::getpeername(fd, addr, len);
  return vsocket_getpeername(fd, addr, len);
}
