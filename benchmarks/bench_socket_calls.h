// The socket calls vsocket-bench makes: through vsocket, or straight to the
// kernel for the baseline row "tcp", so that every ratio is against kernel
// TCP itself and not against vsocket's own TCP path (which keeps a live
// page entry, looks up its socket table, and names the connection).
//
// Chosen once per process, before its first socket (each transport runs in
// processes of its own: bench_runner.cc); read-only afterwards, any thread.
#ifndef VSOCKET_BENCHMARKS_BENCH_SOCKET_CALLS_H_
#define VSOCKET_BENCHMARKS_BENCH_SOCKET_CALLS_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <string>

namespace vbench {

struct SocketCalls {
  int (*socket)(int, int, int);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*getsockname)(int, sockaddr*, socklen_t*);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  int (*poll)(pollfd*, nfds_t, int);
  int (*close)(int);
};

// The transport whose rows bypass vsocket: kernel TCP.
inline const char kKernelTransport[] = "tcp";

// REQUIRES: before this process's first socket.
void UseKernelSockets(bool kernel);
// True in a process that runs the kernel TCP baseline.
bool KernelSockets();
const SocketCalls& Sock();

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_SOCKET_CALLS_H_
