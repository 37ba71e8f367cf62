#include "socket_api.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vsocket/vsocket.h"

namespace vsocket_test {
namespace {

// libc's fcntl and ioctl are variadic; the table wants fixed signatures.
int KernelFcntl(int fd, int cmd, long arg) { return ::fcntl(fd, cmd, arg); }
int KernelIoctl(int fd, unsigned long request, void* arg) {
  return ::ioctl(fd, request, arg);
}
int VsocketFcntl(int fd, int cmd, long arg) { return vsocket_fcntl(fd, cmd, arg); }

}  // namespace

const SocketApi& KernelApi() {
  static const SocketApi api = {
      ::socket,  ::bind,    ::listen,     ::accept,      ::connect,
      ::send,    ::recv,    ::sendmsg,    ::recvmsg,     ::readv,
      ::writev,  ::shutdown,
      ::close,   ::setsockopt, ::getsockopt, ::getsockname, KernelFcntl, KernelIoctl,
      ::poll,    nullptr,   ::read,      ::write,      ::accept4, nullptr};
  return api;
}

const SocketApi& VsocketApi() {
  static const SocketApi api = {
      vsocket_socket,   vsocket_bind,     vsocket_listen,     vsocket_accept,
      vsocket_connect,  vsocket_send,     vsocket_recv,       vsocket_sendmsg,
      vsocket_recvmsg,  vsocket_readv,    vsocket_writev,     vsocket_shutdown, vsocket_close,      vsocket_setsockopt,
      vsocket_getsockopt, vsocket_getsockname, VsocketFcntl,  vsocket_ioctl,      vsocket_poll,
      vsocket_transport_name, vsocket_read, vsocket_write, vsocket_accept4,
      vsocket_fallback_reason};
  return api;
}

}  // namespace vsocket_test
