// Chooses the transport of a new connection (see docs/PROTOCOL.md).
//  Client: before the SYN, PrepareOffer() decides whether the destination is
//  a vsocket listener on this host that may share memory with us, and if so
//  creates the offer (segment + doorbell) named by the connection key.
//  Otherwise (peer on another host, or VSOCKET_TRANSPORT=rdma) it probes the
//  peer's RDMA CM and, if a vsocket RDMA listener answers, holds the
//  established channel (rdma_backend/rdma_negotiation.h).  After the kernel
//  connect succeeds, CompleteOffer() builds the transport.
//  Server: after the kernel accept, ClaimOffer() pairs the connection with a
//  parked RDMA channel (rdma_backend/rdma_acceptor.h) or looks for the
//  client's shared-memory offer and claims it.
// Every path that ends on kernel TCP carries a FallbackReason.
// Blocking: the shm steps never wait for the peer; the RDMA probe waits at
// most VSOCKET_RDMA_PROBE_MS, and an RDMA claim at most ~1 s for a handshake
// the client already started.
#ifndef VSOCKET_VSOCKET_PATH_SELECTION_H_
#define VSOCKET_VSOCKET_PATH_SELECTION_H_

#include <sys/socket.h>

#include <memory>

#include "vsocket/fallback_reason.h"
#include "vsocket/transport.h"

namespace vsocket {

namespace fifo {
class ShmSegment;
class Doorbell;
}  // namespace fifo

// An established RDMA channel waiting for its kernel TCP twin (client side);
// defined in path_selection.cc.  Destroying it closes the channel.
struct RdmaPending;

// An unclaimed shared-memory offer or a pending RDMA channel (client side),
// between PrepareOffer and CompleteOffer.  Destroying it withdraws the offer.
struct PendingOffer {
  PendingOffer();
  PendingOffer(PendingOffer&&) noexcept;
  PendingOffer& operator=(PendingOffer&&) noexcept;
  ~PendingOffer();
  bool valid() const { return segment != nullptr || rdma != nullptr; }
  bool is_rdma() const { return rdma != nullptr; }

  std::unique_ptr<fifo::ShmSegment> segment;
  std::unique_ptr<fifo::Doorbell> doorbell;
  std::unique_ptr<RdmaPending> rdma;
};

// REQUIRES: fd is an unconnected AF_INET/AF_INET6 stream socket.
// May bind fd to an ephemeral port (the key needs the client port).
FallbackReason PrepareOffer(int fd, const struct sockaddr* addr,
                            socklen_t len, PendingOffer* offer);

// REQUIRES: the kernel connection on `fd` is established.  Moves the
// kernel socket to a private descriptor and puts the offer's wait socket at
// number `fd`.  Returns the transport or nullptr (then fd is unchanged and
// the caller uses TCP).
std::unique_ptr<Transport> CompleteOffer(int fd, PendingOffer offer);

// Server: `accepted_fd` is a freshly accepted kernel socket.  On success
// returns a transport that owns accepted_fd and whose user descriptor is new;
// otherwise nullptr and *reason says why.
std::unique_ptr<Transport> ClaimOffer(int accepted_fd, FallbackReason* reason);

// Opens the listener marker for a listening socket; -1 if none was made.
int OpenMarkerFor(int listen_fd);

// Starts RDMA listening beside a listening socket (same address and port);
// returns a handle for ClaimOffer/StopRdmaListening, or -1 (no device,
// policy, IPv6 address, built without rdma-core).
int StartRdmaListening(int listen_fd);
void StopRdmaListening(int handle);

// Server: like ClaimOffer, for a connection accepted from a listener with an
// RDMA handle: pairs it with its client's RDMA channel.  nullptr and
// *reason (peer_not_vsocket when the client announced none).
std::unique_ptr<Transport> ClaimRdma(int rdma_handle, int accepted_fd,
                                     FallbackReason* reason);

// How long a non-blocking connect may be waited for before the socket stays
// on TCP (connect_in_progress): 5 ms for a local shm offer, the probe time
// for an RDMA peer (whose CM just answered).
int HandshakeWaitMs(const PendingOffer& offer);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_PATH_SELECTION_H_
