// Moving exactly `len` bytes over a connected stream socket in a forked
// test child, through a SocketApi (kernel or vsocket).  Blocking sockets
// only: a call that returns 0 or -1 before all bytes moved Fail()s
// (child_check.h), naming the call, its result and what was still due.
#ifndef VSOCKET_TESTS_SUPPORT_EXACT_IO_H_
#define VSOCKET_TESTS_SUPPORT_EXACT_IO_H_

#include <sys/socket.h>

#include <cstddef>

#include "socket_api.h"

namespace vsocket_test {

// api.send() until all of buf went out (a short send is continued).
void SendAll(const SocketApi& api, int fd, const void* buf, size_t len,
             int flags = MSG_NOSIGNAL);
// api.recv() until buf holds len bytes; end of stream is a failure.
void RecvAll(const SocketApi& api, int fd, void* buf, size_t len, int flags = 0);

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_EXACT_IO_H_
