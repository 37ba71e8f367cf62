// A transport provider: everything one fabric does around a connection, so
// that path selection (vsocket/path_selection.h) can walk a list of them
// without knowing any by name.  In the spirit of Seastar's network_stack
// (one object per stack that makes its connected_socket_impls) and of eRPC's
// transport per fabric.
//
// A provider lives in its backend's folder and is registered, in priority order, by the
// library's one assembly file (providers/builtin_providers.cc).  The core
// owns the objects a provider returns (PendingConnection,
// ListenerAttachment, Transport) and calls them; the provider keeps its
// fabric's state inside them, as a ZeroCopyRegion::Attachment does.
//
// Threading: every method may be called from any application thread, at
// the same time for different sockets; providers are immutable after
// registration except for their own internal, thread-safe state.
#ifndef VSOCKET_VSOCKET_TRANSPORT_PROVIDER_H_
#define VSOCKET_VSOCKET_TRANSPORT_PROVIDER_H_

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsocket/connection_endpoints.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/transport.h"
#include "vsocket/transport_kind.h"

namespace vsocket {

// Why a provider did not take a connection.  `applies` is false when the
// fabric cannot reach that peer at all (shared memory and a peer on another
// host; an RDMA CM that has no IPv6): path selection then asks the next
// provider.  When true the fabric could have, but this peer, this process or
// a resource said no, and path selection stops there with `reason`.
struct Decline {
  FallbackReason reason = FallbackReason::kNone;
  bool applies = true;
};

// How path selection asks for an offer (TransportProvider::Offer).
struct OfferOptions {
  bool forced = false;       // the policy names this provider alone
  uint64_t ring_bytes = 0;   // the shared-memory ring size to use
};

// Client side, between the offer (before the kernel connect) and the
// established kernel connection.  Destroying it withdraws the offer (the
// peer's side is told, or times out, and uses TCP).
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;

  // How long a non-blocking connect may be waited for inside connect()
  // before the socket stays on TCP (connect_in_progress).
  virtual int handshake_wait_ms() const = 0;

  // REQUIRES: the kernel connection on `fd` (the user's number) is
  // established.  Builds the transport; on success `fd` names its user
  // descriptor from now on (vsocket/user_descriptor.h) and the kernel
  // socket moved to a private number the transport owns.  On failure
  // returns nullptr with *reason set; `fd` is then unchanged (kernel TCP).
  virtual std::unique_ptr<Transport> Complete(int fd,
                                              FallbackReason* reason) = 0;
};

// Server side: what a provider set up beside one listening socket (a
// marker, an RDMA CM listener).  Owned by the listening VirtualSocket;
// destroying it stops offering the fabric on that listener.
class ListenerAttachment {
 public:
  virtual ~ListenerAttachment() = default;

  // `accepted_fd` was just accepted from the listener.  Claims the
  // client's offer on this fabric: returns a transport that owns
  // accepted_fd (its user descriptor is new and close-on-exec, or takes
  // accepted_fd's number and flags), or nullptr with accepted_fd unchanged
  // and a Decline (`applies` false when the client offered nothing here).
  // `ends`: the addresses the core knows (the peer's always); the claim
  // may fill the others in (ConnectionEndpoints::NameLocal), and the core
  // then uses them for the live page.
  // Blocking: bounded by the provider (an RDMA handshake in flight).
  // A connection with no offer is the common case for a server whose
  // clients are plain programs: deciding that must cost few system calls.
  virtual std::unique_ptr<Transport> Claim(int accepted_fd,
                                           ConnectionEndpoints* ends,
                                           Decline* decline) = 0;

  // The listening socket was sent to another process (SCM_RIGHTS), which
  // may accept on it without vsocket: stop announcing the fabric to new
  // clients (they take TCP at once rather than wait for a claim that may
  // never come), but keep claiming what this process accepts.  Any thread.
  virtual void PassedOut() {}

  // `accepted_fd` was just accepted, but this process may not use a fabric
  // (path_selection.h, WithdrawFastPaths): if the client offered one here,
  // tell it at once to use TCP, as a refused claim would.  Any thread.
  virtual void RefuseOffer(int accepted_fd, ConnectionEndpoints* ends) {
    (void)accepted_fd;
    (void)ends;
  }

  // Hand-over across exec, in the old image (preload/exec_handover.h): the
  // text fields (no ',' or ';') from which the provider's
  // AdoptListenerFromExec rebuilds this attachment in the new image, and
  // the private descriptors the new image must inherit for it.  false: not
  // handed over (the new image attaches afresh, as listen() would).
  virtual bool DescribeForExec(std::vector<std::string>* fields,
                               std::vector<int>* keep) {
    (void)fields;
    (void)keep;
    return false;
  }
};

class TransportProvider {
 public:
  virtual ~TransportProvider() = default;

  // As VSOCKET_TRANSPORT names it, and in VSOCKET_STATS ("shm", "rdma").
  virtual const char* name() const = 0;
  virtual TransportKind kind() const = 0;
  // TransportCapability bits its connections have.
  virtual uint32_t capabilities() const = 0;

  // Client, before the kernel connect of `fd` to `peer`.  `options.forced`:
  // the policy names this provider (VSOCKET_TRANSPORT or a rule), which
  // then is the only one asked and may go where it otherwise would not
  // (RDMA to this host).  `options.ring_bytes`: the shared-memory ring
  // size (VSOCKET_RING_SIZE or the rule's ring=).
  // On success sets *pending and returns Decline{kNone}.  May bind `fd` to
  // an ephemeral port.  Blocking: bounded by the provider's own limit.
  virtual Decline Offer(int fd, const struct sockaddr* peer, socklen_t len,
                        const OfferOptions& options,
                        std::unique_ptr<PendingConnection>* pending) = 0;

  // Server, in listen(): called once with kernel_listening false just
  // before the kernel listen() (a fabric whose clients must find it before
  // the TCP port opens attaches then), and, if it returned nullptr, once
  // more with true just after it.  nullptr: not offered on this listener.
  virtual std::unique_ptr<ListenerAttachment> AttachListener(
      int listen_fd, bool kernel_listening) = 0;

  // Before an application thread may sleep in the kernel on descriptors
  // vsocket gave out (poll/select/epoll_wait): arm whatever wake-up source
  // the provider left disarmed while busy.  Any thread; never blocks; must
  // cost next to nothing when there is nothing to arm.
  virtual void BeforeKernelWait() {}
  // Sends bytes this provider's connections accepted but hold back (see
  // vsocket/kernel_wait.h, BeforeWait).  Called only after the provider
  // called NoteHeldBackBytes().  Any thread; never blocks.
  virtual void FlushHeldBack() {}

  // ---- Hand-over across exec (kCapExecHandover), in the new image ----
  // The private descriptors that `fields` (from Transport::DescribeForExec)
  // names, so that the caller can refuse a descriptor named twice.  false:
  // the fields are malformed.
  virtual bool ExecDescriptors(const std::vector<std::string>& fields,
                               std::vector<int>* fds) {
    (void)fields;
    (void)fds;
    return false;
  }
  // Rebuilds the connection whose user descriptor is `user_fd`, taking
  // over the descriptors ExecDescriptors() named once they check out (a
  // descriptor not of the kind described is left alone).  nullptr with
  // *why on failure.  Runs once, on the library constructor's thread.
  virtual std::unique_ptr<Transport> AdoptFromExec(
      const std::vector<std::string>& fields, int user_fd, const char** why) {
    (void)fields;
    (void)user_fd;
    *why = "this transport is not handed over across exec";
    return nullptr;
  }
  // A listener's attachment: the private descriptors that `fields` (from
  // ListenerAttachment::DescribeForExec) names.  false: malformed.
  virtual bool ListenerExecDescriptors(const std::vector<std::string>& fields,
                                       std::vector<int>* fds) {
    (void)fields;
    (void)fds;
    return false;
  }
  // Rebuilds a listener's attachment, taking over the descriptors
  // ListenerExecDescriptors() named once they check out (one not of the
  // kind described is left alone).  nullptr with *why on failure.  Runs
  // once, on the library constructor's thread.
  virtual std::unique_ptr<ListenerAttachment> AdoptListenerFromExec(
      const std::vector<std::string>& fields, const char** why) {
    (void)fields;
    *why = "this transport's listeners are not handed over across exec";
    return nullptr;
  }
  // True when `fd` is, by its kind and name alone, a user descriptor this
  // fabric makes for its connections (not necessarily one of this
  // process's): what a failed hand-over or move to TCP must not leave
  // behind.  Any thread; never blocks.
  virtual bool IsUserDescriptor(int fd) const {
    (void)fd;
    return false;
  }
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TRANSPORT_PROVIDER_H_
