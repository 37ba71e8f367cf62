// socket, bind, listen, accept, accept4, connect, shutdown, close,
// close_range, closefrom, fclose, fdopen, dup, dup2, dup3.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/descriptors.h"
#include "preload/move_to_tcp.h"
#include "preload/epoll_set.h"
#include "preload/epoll_tracking.h"
#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "base/private_fd.h"
#include "base/real_libc.h"
#include "vsocket/config.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
namespace real = vsocket::preload::real;
using vsocket::preload::Ours;

namespace {

// close_range()/closefrom(): forget the virtual sockets in [first, last].
// Nothing in a vfork child: the tables are its parent's, which still holds
// every one of those numbers (Python's subprocess closes them so).
void ForgetRange(unsigned int first, unsigned int last) {
  int highest = vsocket::preload::HighestVirtualFd();
  if (highest < 0 || first > static_cast<unsigned int>(highest)) return;
  if (vsocket::preload::SharesParentMemory()) return;
  if (last > static_cast<unsigned int>(highest)) last = highest;
  for (unsigned int fd = first; fd <= last; ++fd) {
    if (Ours(static_cast<int>(fd)))
      vsocket::preload::ForgetDescriptor(static_cast<int>(fd));
  }
}

}  // namespace

VSP_EXPORT int socket(int domain, int type, int protocol) __THROW {
  int fd = vsocket_socket(domain, type, protocol);
  if (fd >= 0 && vsocket::MaybeVirtualFd(fd)) vsocket::preload::NoteVirtualFd(fd);
  return fd;
}

VSP_EXPORT int bind(int fd, const struct sockaddr* addr, socklen_t len) __THROW {
  return sys::bind(fd, addr, len);  // nothing to do before the kernel's bind
}

VSP_EXPORT int listen(int fd, int backlog) __THROW {
  if (!Ours(fd)) return sys::listen(fd, backlog);
  return vsocket_listen(fd, backlog);
}

VSP_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  if (!Ours(fd)) return sys::accept4(fd, addr, len, flags);
  int conn = vsocket_accept4(fd, addr, len, flags);
  if (conn >= 0) vsocket::preload::NoteVirtualFd(conn);
  return conn;
}

VSP_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  return accept4(fd, addr, len, 0);
}

VSP_EXPORT int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  if (!Ours(fd)) return sys::connect(fd, addr, len);
  auto regs = vsocket::preload::DetachEpollRegistrations(fd);
  int rc = vsocket_connect(fd, addr, len);
  if (!regs.empty()) {
    int saved = errno;
    vsocket::preload::RestoreEpollRegistrations(fd, regs);
    errno = saved;
    if (rc == 0) {
      for (const auto& r : regs) vsocket::preload::EpollSet::NoteFastPath(r.epfd, fd);
    }
  }
  return rc;
}

VSP_EXPORT int shutdown(int fd, int how) __THROW {
  if (!Ours(fd)) return sys::shutdown(fd, how);
  return vsocket_shutdown(fd, how);
}

VSP_EXPORT int close(int fd) {
  if (!Ours(fd)) {
    vsocket::preload::EpollSet::Closed(fd);
    vsocket::preload::ForgetEpollSetRegistrations(fd);
    return sys::close(fd);
  }
  // A vfork child closes its own descriptor, never its parent's socket
  // (whose tables it shares until it execs).
  if (vsocket::preload::SharesParentMemory()) return sys::close(fd);
  return vsocket::preload::CloseDescriptor(fd);
}

// stdio reads and writes with libc's internal calls, which no interposer
// sees: a connection given to fdopen() continues on kernel TCP.
VSP_EXPORT FILE* fdopen(int fd, const char* mode) __THROW {
  if (Ours(fd) && vsocket::GetConfig().stdio_on_tcp &&
      !vsocket::preload::SharesParentMemory()) {
    vsocket::preload::MoveConnectionToKernelTcp(
        fd, vsocket::FallbackReason::kStdioDescriptor);
  }
  return real::fdopen(fd, mode);
}

// fclose() closes its descriptor with libc's internal close, which no
// interposer sees: forget a virtual socket's number first, or a later file
// that reuses the number would be taken for the old socket.
VSP_EXPORT int fclose(FILE* stream) {
  int fd = stream ? ::fileno(stream) : -1;
  if (fd >= 0 && Ours(fd) && !vsocket::preload::SharesParentMemory())
    vsocket::preload::ForgetDescriptor(fd);
  return real::fclose(stream);
}

VSP_EXPORT int close_range(unsigned int first, unsigned int last,
                           int flags) __THROW {
  // CLOSE_RANGE_CLOEXEC only marks descriptors: nothing is closed yet.
  if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last) {
    ForgetRange(first, last);
    sys::NoteRangeClosed();
  }
  return real::close_range(first, last, flags);
}

VSP_EXPORT void closefrom(int lowfd) __THROW {
  if (lowfd >= 0) {
    ForgetRange(static_cast<unsigned int>(lowfd), ~0u);
    sys::NoteRangeClosed();
  }
  real::closefrom(lowfd);
}

VSP_EXPORT int dup(int fd) __THROW {
  if (!Ours(fd)) return real::dup(fd);
  return vsocket::preload::DuplicateKeepingStdioOnTcp(vsocket::preload::DupOp::kDup,
                                                      fd, 0, 0);
}

VSP_EXPORT int dup2(int oldfd, int newfd) __THROW {
  if (!Ours(oldfd) && !Ours(newfd)) return real::dup2(oldfd, newfd);
  return vsocket::preload::DuplicateKeepingStdioOnTcp(vsocket::preload::DupOp::kDup2,
                                                      oldfd, newfd, 0);
}

VSP_EXPORT int dup3(int oldfd, int newfd, int flags) __THROW {
  if (!Ours(oldfd) && !Ours(newfd)) return sys::dup3(oldfd, newfd, flags);
  return vsocket::preload::DuplicateKeepingStdioOnTcp(vsocket::preload::DupOp::kDup3,
                                                      oldfd, newfd, flags);
}
