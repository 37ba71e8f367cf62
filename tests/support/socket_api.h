// The socket calls a test makes, as a table of function pointers: one table
// calls libc directly (the kernel reference, no vsocket at all), the other
// calls the explicit vsocket API.  Code written once against SocketApi runs
// unchanged on kernel TCP and on every vsocket transport (the conformance
// cases, the forked pairs' listen/connect in stream_endpoints.h).
// VsocketApi() needs the vsocket library linked by the test binary.
#ifndef VSOCKET_TESTS_SUPPORT_SOCKET_API_H_
#define VSOCKET_TESTS_SUPPORT_SOCKET_API_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace vsocket_test {

struct SocketApi {
  int (*socket)(int domain, int type, int protocol);
  int (*bind)(int fd, const sockaddr* addr, socklen_t len);
  int (*listen)(int fd, int backlog);
  int (*accept)(int fd, sockaddr* addr, socklen_t* len);
  int (*connect)(int fd, const sockaddr* addr, socklen_t len);
  ssize_t (*send)(int fd, const void* buf, size_t len, int flags);
  ssize_t (*recv)(int fd, void* buf, size_t len, int flags);
  ssize_t (*sendmsg)(int fd, const msghdr* msg, int flags);
  ssize_t (*recvmsg)(int fd, msghdr* msg, int flags);
  ssize_t (*readv)(int fd, const iovec* iov, int iovcnt);
  ssize_t (*writev)(int fd, const iovec* iov, int iovcnt);
  int (*shutdown)(int fd, int how);
  int (*close)(int fd);
  int (*setsockopt)(int fd, int level, int name, const void* val, socklen_t len);
  int (*getsockopt)(int fd, int level, int name, void* val, socklen_t* len);
  int (*getsockname)(int fd, sockaddr* addr, socklen_t* len);
  int (*fcntl)(int fd, int cmd, long arg);  // F_GETFL / F_SETFL
  int (*ioctl)(int fd, unsigned long request, void* arg);
  int (*poll)(pollfd* fds, nfds_t nfds, int timeout_ms);
  // The path a connected socket took ("tcp", "shm", "rdma"); nullptr in
  // the kernel table, which has no vsocket to ask.
  const char* (*transport_name)(int fd);
  ssize_t (*read)(int fd, void* buf, size_t len);
  ssize_t (*write)(int fd, const void* buf, size_t len);
  int (*accept4)(int fd, sockaddr* addr, socklen_t* len, int flags);
  // Why a connected socket is not on the fast path (vsocket_fallback_reason);
  // nullptr in the kernel table.
  const char* (*fallback_reason)(int fd);
};

// libc only: links no vsocket call.
const SocketApi& KernelApi();
// include/vsocket/vsocket.h.
const SocketApi& VsocketApi();

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_SOCKET_API_H_
