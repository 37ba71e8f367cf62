// The _FORTIFY_SOURCE entry points that read from a descriptor.  glibc's own
// versions call its internal read/recv, which no interposer can see, so a
// fortified program would read a shared-memory socket's wait socket instead
// of the rings.  These check the buffer like glibc, then take the same path
// as read/recv/recvfrom.  (__poll_chk and __ppoll_chk are not needed: poll
// itself is not interposed.)
#include <sys/socket.h>
#include <unistd.h>

#include "preload/preload_internal.h"
#include "base/real_libc.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
using vsocket::preload::Ours;

extern "C" [[noreturn]] void __chk_fail(void);

VSP_EXPORT ssize_t __read_chk(int fd, void* buf, size_t len, size_t buflen) {
  if (len > buflen) __chk_fail();
  if (!Ours(fd)) return sys::read(fd, buf, len);
  return vsocket_read(fd, buf, len);
}

VSP_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buflen,
                              int flags) {
  if (len > buflen) __chk_fail();
  if (!Ours(fd)) return sys::recv(fd, buf, len, flags);
  return vsocket_recv(fd, buf, len, flags);
}

VSP_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t buflen,
                                  int flags, struct sockaddr* addr,
                                  socklen_t* addrlen) {
  if (len > buflen) __chk_fail();
  if (!Ours(fd)) return sys::recvfrom(fd, buf, len, flags, addr, addrlen);
  return vsocket_recvfrom(fd, buf, len, flags, addr, addrlen);
}
