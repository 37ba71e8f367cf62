// Server side of choosing RDMA (docs/PROTOCOL.md section 5).
//
// When a vsocket socket listens and an RDMA device exists, an RdmaListener
// listens on the same address and port in the RDMA CM's own port space
// (RDMA_PS_TCP).  The process's progress thread (progress_thread.h) answers
// connection requests at once, without the application's help (it may be
// blocked in accept() or epoll): it validates the client's hello, makes the
// connection's descriptors, completes the handshake, builds the transport
// and PARKS it under (client ip, client TCP port) from the hello.  The
// client commits to RDMA at ESTABLISHED, so everything that can fail runs
// before rdma_accept (only the progress thread's watch comes after it).
// accept() then pairs the kernel-accepted TCP connection with its parked
// transport (ClaimRdmaChannel), waiting a bounded time if the handshake for
// that client is still in flight; the pairing makes no descriptor.  A
// parked transport waits for accept() as the kernel's backlog does, until
// its client gives up (then it is dropped) or the listener stops.  Only
// when another process may accept the TCP connection (SO_REUSEPORT, a
// listener passed out) is one nobody claims within
// VSOCKET_CLAIM_TIMEOUT_MS reset, so its client gets ECONNRESET instead of
// waiting for ever.
//
// Threading: thread-safe.
// Fork: a listener belongs to the process that created it.  When that
// process forks, all its RDMA listeners stop (pthread_atfork, parent side):
// a pre-fork server's children accept the TCP connections, and a channel
// parked in the parent would leave the two ends on different paths.  New
// clients are then rejected and use TCP (peer_not_vsocket).  In a forked
// child ClaimRdmaChannel() finds nothing (TCP).
#ifndef VSOCKET_RDMA_BACKEND_RDMA_ACCEPTOR_H_
#define VSOCKET_RDMA_BACKEND_RDMA_ACCEPTOR_H_

#include <memory>

#include "vsocket/fallback_reason.h"
#include "vsocket/transport.h"

namespace vsocket::rdma {

// Starts RDMA listening for the socket `listen_fd` (same address and port),
// which must be bound to its port already; call it before the kernel
// listen() so that clients never find the TCP port open and the RDMA one
// closed.  Returns a handle > 0, or -1 if RDMA is unavailable (no device,
// policy, address family, port 0, bind failure: logged at info).
int StartRdmaListener(int listen_fd);
// Stops listening and closes every unclaimed channel.  Idempotent.
void StopRdmaListener(int handle);
// The kernel listener of `handle` was sent to another process, which may
// accept connections whose channels park here: from now on a parked
// channel nobody claims within VSOCKET_CLAIM_TIMEOUT_MS is reset.  Any
// thread.
void NoteRdmaListenerPassedOut(int handle);

// REQUIRES: `accepted_fd` was accepted from the listener of `handle`.
// If the client of `accepted_fd` established an RDMA channel, returns its
// transport, which owns the kernel socket at a private number; the number
// `accepted_fd` names the transport's user descriptor from then on (keeping
// its close-on-exec flag).  Otherwise nullptr with `accepted_fd` unchanged
// and *reason (peer_not_vsocket: the client announced nothing;
// peer_rdma_memory_limit / peer_declined_rdma: it declined RDMA, naming
// its cause; rdma_setup_failed: the channel broke before accept; what the
// handshake could not set up: fd_limit, rdma_memory_limit,
// rdma_setup_failed).
std::unique_ptr<Transport> ClaimRdmaChannel(int handle, int accepted_fd,
                                            FallbackReason* reason);

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_ACCEPTOR_H_
