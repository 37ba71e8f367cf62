// TCP_DEFER_ACCEPT on listeners that vsocket serves.
//
// With the option the kernel holds a connection back from accept() until
// its first data arrive (or the option's timeout passes).  A shared-memory
// or RDMA client sends nothing on its kernel TCP connection -- its bytes go
// through the ring -- so its connection would wait out the timeout, and the
// client's offer its claim timeout (3 s, then TCP): every fast-path
// connection of, say, nginx with `listen ... deferred` slowed by seconds.
//
// So on a listener with fast-path attachments (path_selection.h) vsocket
// keeps the option from the kernel: it remembers the value, which
// getsockopt reports as the kernel would (the kernel's own rounding), and
// accept() returns connections at once.  A plain TCP client of such a
// listener is then accepted before its data arrive, as the kernel does at
// the option's timeout: a program that sets the option handles that already.
// Not carried across exec: a listener the new image inherits keeps the
// option off in the kernel, and its getsockopt reports 0.
//
// Threading: any thread; the value lives in an atomic of the VirtualSocket.
#ifndef VSOCKET_VSOCKET_DEFERRED_ACCEPT_H_
#define VSOCKET_VSOCKET_DEFERRED_ACCEPT_H_

#include <sys/socket.h>

#include "vsocket/virtual_socket.h"

namespace vsocket {

// setsockopt(IPPROTO_TCP, TCP_DEFER_ACCEPT) on `vs`, whose kernel socket is
// `fd`.  True if handled here, with the call's result in *rc (0, or -1 and
// errno as the kernel gives); false: pass it to the kernel.
bool SetDeferAccept(VirtualSocket* vs, int fd, const void* val, socklen_t len,
                    int* rc);

// getsockopt(IPPROTO_TCP, TCP_DEFER_ACCEPT) likewise.
bool GetDeferAccept(const VirtualSocket& vs, void* val, socklen_t* len,
                    int* rc);

// After listen() attached fast paths to `vs` (kernel socket `fd`): takes an
// option set before listen() off the kernel.  REQUIRES: vs is listening.
void HoldDeferAcceptFromKernel(VirtualSocket* vs, int fd);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_DEFERRED_ACCEPT_H_
