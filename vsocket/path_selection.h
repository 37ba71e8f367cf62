// Chooses the transport of a new connection by walking the registered
// providers (vsocket/provider_registry.h) in priority order; knows none by
// name.  See docs/PROTOCOL.md for what each provider does on the wire.
//
//  Client: before the SYN, PrepareOffer() asks each provider the policy
//  allows (VSOCKET_TRANSPORT, or the first matching rule of the rules file
//  when that is auto: all, one, or none) for an offer.  The walk
//  stops at the first offer, or at the first decline that `applies` (the
//  fabric could reach the peer but said no); a decline that does not apply
//  (the fabric cannot reach that peer) passes to the next provider.  The
//  reason kept is that of the stopping decline, else the first one.  After
//  the kernel connect succeeds, CompleteOffer() builds the transport.
//  Server: listen() attaches every allowed provider beside the kernel
//  listener (AttachListeners); accept() asks each attachment, in the same
//  order, to claim the connection (ClaimAccepted).
// Every path that ends on kernel TCP carries a FallbackReason.
// Blocking: bounded by each provider (shm never waits for the peer; the
// RDMA probe waits at most VSOCKET_RDMA_PROBE_MS).
// Threading: any thread; calls for different sockets may run at once.
#ifndef VSOCKET_VSOCKET_PATH_SELECTION_H_
#define VSOCKET_VSOCKET_PATH_SELECTION_H_

#include <sys/socket.h>

#include <memory>
#include <vector>

#include "vsocket/fallback_reason.h"
#include "vsocket/transport.h"
#include "vsocket/transport_provider.h"

namespace vsocket {

// REQUIRES: fd is an unconnected AF_INET/AF_INET6 stream socket.
// kNone with *pending set, or the reason no provider offered.  May bind fd
// to an ephemeral port (providers name offers after the client port).
// *rule_line: the line of the rules file (vsocket/rules.h) that decided,
// or 0.
FallbackReason PrepareOffer(int fd, const struct sockaddr* addr,
                            socklen_t len,
                            std::unique_ptr<PendingConnection>* pending,
                            uint32_t* rule_line);

// REQUIRES: the kernel connection on `fd` is established.  The transport
// (whose user descriptor is now at number `fd`), or kernel TCP on `fd`
// with the reason the offer could not be completed.
std::unique_ptr<Transport> CompleteOffer(
    int fd, std::unique_ptr<PendingConnection> pending, FallbackReason reason);

// What the providers set up beside one listening socket: one slot per
// registered provider, in priority order (nullptr: not attached).
using ListenerAttachments = std::vector<std::unique_ptr<ListenerAttachment>>;

// Asks every allowed provider without an attachment in *set to attach
// (see TransportProvider::AttachListener for `kernel_listening`).  A
// listener's rule is matched on its bound address (the remote is not known
// yet: only a rule whose REMOTE is * can match); *rule_line as above.
void AttachListeners(int listen_fd, bool kernel_listening,
                     ListenerAttachments* set, uint32_t* rule_line);

// Server: `accepted_fd` is a freshly accepted kernel socket.  A transport
// that owns accepted_fd (its user descriptor is new or accepted_fd's
// number: ListenerAttachment::Claim), or kernel TCP on
// accepted_fd with the reason (`rule_line`: the listener's rule, whose
// policy names the reason when no provider was attached).  `ends` as in
// ListenerAttachment::Claim.
std::unique_ptr<Transport> ClaimAccepted(const ListenerAttachments& set,
                                         int accepted_fd, ConnectionEndpoints* ends,
                                         uint32_t rule_line);

// From now on, for the life of this process, no fabric is offered,
// attached or claimed: every new connection is kernel TCP with `reason`
// (the program started io_uring, whose socket operations the kernel runs
// without libc).  An accept that finds a client's offer declines it at
// once (ListenerAttachment::RefuseOffer).  Existing connections and listeners
// are the caller's to move and quiet.  Any thread; the first reason stays.
void WithdrawFastPaths(FallbackReason reason);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_PATH_SELECTION_H_
