// Connection setup for RdmaChannel with librdmacm.
//
// Client: rdma_create_event_channel, rdma_create_id (RDMA_PS_TCP),
// rdma_resolve_addr, rdma_resolve_route, create CQ/QP, post receives,
// rdma_connect with our Hello (wire_format.h) as private data, wait for
// ESTABLISHED, decode the server's Hello from the REP.
// Server: rdma_bind_addr + rdma_listen on a listener id; Accept() takes a
// CONNECT_REQUEST, validates the client's Hello, moves the new id to its own
// event channel, creates CQ/QP, posts receives, rdma_accept with our Hello,
// waits for ESTABLISHED.
//
// iWARP devices have no RDMA WRITE WITH IMMEDIATE: both sides refuse them
// (EPROTONOSUPPORT with an explanation), as soon as the device is known.
// Every wait is bounded by ChannelOptions::connect_timeout_ns.
//
// Threading: a listener is used by one thread at a time.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_CM_CONNECTION_H_
#define VSOCKET_RDMA_BACKEND_RDMA_CM_CONNECTION_H_

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <functional>
#include <memory>
#include <string>

#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/wire_format.h"

namespace vsocket::rdma {

// Connects to `server`.  Address and route resolution share one
// connect_timeout_ns; the wait for the server's answer gets another, counted
// after the local setup (CQ, QP, first-use pool registration).
// On failure returns nullptr, sets errno
// (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, EPROTONOSUPPORT, ENOMEM, EPROTO for
// an invalid peer Hello, ENOBUFS when the server declined for its memory
// limit, EREMOTEIO for its decline of a cause this version does not know,
// ...) and a human-readable *error.
std::unique_ptr<RdmaChannel> RdmaConnect(const struct sockaddr_in& server,
                                         const ChannelOptions& options,
                                         std::string* error);

// Tells the vsocket server at `server` that our connection from local TCP
// port `tcp_port` will use TCP for `cause`, a reason of ours (a decline,
// wire_format.h), so that its accept() reports that instead of
// peer_not_vsocket.  Waits for the server's answer (it rejects every
// decline, after recording it), so the kernel connect may follow at once;
// resolution and the answer are bounded by `timeout_ns` each.  Best effort:
// a failure only costs the server the truthful reason.
void RdmaSendDecline(const struct sockaddr_in& server, uint16_t tcp_port,
                     DeclineCause cause, int64_t timeout_ns);

class RdmaListener {
 public:
  // Binds and listens on `addr` (port 0 picks one; see port()).  nullptr
  // with errno and *error on failure.
  static std::unique_ptr<RdmaListener> Listen(const struct sockaddr_in& addr,
                                              int backlog,
                                              const ChannelOptions& options,
                                              std::string* error);
  ~RdmaListener();
  RdmaListener(const RdmaListener&) = delete;
  RdmaListener& operator=(const RdmaListener&) = delete;

  // Waits up to `timeout_ns` (-1: no limit) for a connection request and
  // completes the handshake (itself bounded by connect_timeout_ns).  A
  // request refused for memory (ENOMEM, EPERM) is rejected with a decline
  // (wire_format.h), any other plainly.
  // nullptr with errno (EAGAIN on timeout) and *error otherwise.  Invalid
  // requests are rejected and reported as EPROTO.
  // If `peer` is non-null it receives the client's address and the TCP port
  // announced in its hello.
  // A client's decline (wire_format.h) is shown to `on_request` (its answer
  // ignored), then rejected and reported as nullptr with errno ECANCELED,
  // `peer` naming its TCP port and cause.
  struct PeerInfo {
    struct sockaddr_storage addr = {};
    uint16_t tcp_port = 0;
    uint8_t declined = 0;  // a DeclineCause (maybe unknown); 0: a hello
  };
  // `on_request`, if set, is called with the peer's info once a valid
  // request or a decline was decoded, before anything is set up for it and
  // before any rejection is sent.  Returning false (with errno set) rejects
  // the request: nullptr with that errno.
  std::unique_ptr<RdmaChannel> Accept(
      int64_t timeout_ns, std::string* error, PeerInfo* peer = nullptr,
      const std::function<bool(const PeerInfo&)>& on_request = nullptr);

  uint16_t port() const;  // host order
  int fd() const { return ec_->fd; }  // readable when a request is pending

  // Requests whose private data is a link hello (version 2, link_wire.h)
  // go to `handler` (which must acknowledge the event) and Accept()
  // returns nullptr with errno EINPROGRESS for them; without a handler
  // they are rejected as invalid, as a version-1 server does.
  void SetLinkHandler(std::function<void(rdma_cm_event*)> handler) {
    link_handler_ = std::move(handler);
  }

 private:
  RdmaListener() = default;
  rdma_event_channel* ec_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ChannelOptions options_;
  std::function<void(rdma_cm_event*)> link_handler_;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_CM_CONNECTION_H_
