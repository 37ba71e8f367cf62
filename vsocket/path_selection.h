// Chooses the transport of a new connection (see docs/PROTOCOL.md).
//  Client: before the SYN, PrepareOffer() decides whether the destination is
//  a vsocket listener on this host that may share memory with us, and if so
//  creates the offer (segment + doorbell) named by the connection key.  After
//  the kernel connect succeeds, CompleteOffer() builds the transport.
//  Server: after the kernel accept, ClaimOffer() looks for the client's offer
//  and claims it.
// Every path that ends on kernel TCP carries a FallbackReason.
// Blocking: none of these wait for the peer; each costs a few system calls.
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

// An unclaimed shared-memory offer (client side), between PrepareOffer and
// CompleteOffer.  Destroying it withdraws the offer.
struct PendingOffer {
  PendingOffer();
  PendingOffer(PendingOffer&&) noexcept;
  PendingOffer& operator=(PendingOffer&&) noexcept;
  ~PendingOffer();
  bool valid() const { return segment != nullptr; }

  std::unique_ptr<fifo::ShmSegment> segment;
  std::unique_ptr<fifo::Doorbell> doorbell;
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

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_PATH_SELECTION_H_
