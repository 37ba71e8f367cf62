#include "bench_socket_calls.h"

#include <unistd.h>

#include "vsocket/vsocket.h"

namespace vbench {
namespace {

// libc's are the kernel's (vsocket-bench links libvsocket, it does not
// preload it).
int KernelPoll(pollfd* fds, nfds_t n, int timeout) { return ::poll(fds, n, timeout); }

const SocketCalls kKernel = {::socket, ::setsockopt, ::bind,   ::listen,
                             ::getsockname, ::connect, ::accept4, ::send,
                             ::recv,   KernelPoll,  ::close};
const SocketCalls kVsocket = {vsocket_socket,  vsocket_setsockopt, vsocket_bind,
                              vsocket_listen,  vsocket_getsockname, vsocket_connect,
                              vsocket_accept4, vsocket_send,       vsocket_recv,
                              vsocket_poll,    vsocket_close};
bool g_kernel = false;

}  // namespace

void UseKernelSockets(bool kernel) { g_kernel = kernel; }
bool KernelSockets() { return g_kernel; }
const SocketCalls& Sock() { return g_kernel ? kKernel : kVsocket; }

}  // namespace vbench
