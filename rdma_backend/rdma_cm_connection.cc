#include "rdma_backend/rdma_cm_connection.h"

#include "base/real_libc.h"
#include "vsocket/wait.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

namespace vsocket::rdma {
namespace {

using ::vsocket::DeadlineAfter;
using ::vsocket::MonotonicNs;

bool SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Sets errno = err and *error = what + strerror, returns nullptr-compatible
// false.
bool Fail(std::string* error, int err, const std::string& what) {
  *error = what + ": " + std::strerror(err);
  errno = err;
  return false;
}

}  // namespace

// Builds RdmaChannel objects for RdmaConnect and RdmaListener (a friend of
// RdmaChannel; not part of the public interface).
class ChannelBuilder {
 public:
  // Waits for the next CM event on `ec` until `deadline_ns`.  On success
  // *out holds the event, which the caller must ack.  Returns false with
  // errno EAGAIN/ETIMEDOUT on timeout.
  static bool NextEvent(rdma_event_channel* ec, int64_t deadline_ns,
                        rdma_cm_event** out, std::string* error) {
    for (;;) {
      if (rdma_get_cm_event(ec, out) == 0) return true;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Fail(error, errno, "rdma_get_cm_event");
      }
      int timeout_ms = -1;
      if (deadline_ns >= 0) {
        int64_t left = deadline_ns - MonotonicNs();
        if (left <= 0) return Fail(error, ETIMEDOUT, "waiting for RDMA CM");
        timeout_ms = static_cast<int>(left / 1'000'000) + 1;
      }
      struct pollfd pfd = {ec->fd, POLLIN, 0};
      if (sys::poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR) {
        return Fail(error, errno, "poll(rdma_cm fd)");
      }
    }
  }

  // Waits for an event of type `want`; other types are failures mapped to
  // errno.  On success *out must be acked by the caller.
  static bool Expect(rdma_event_channel* ec, rdma_cm_event_type want,
                     int64_t deadline_ns, rdma_cm_event** out,
                     std::string* error) {
    if (!NextEvent(ec, deadline_ns, out, error)) return false;
    rdma_cm_event* ev = *out;
    if (ev->event == want) return true;
    int err = EPROTO;
    switch (ev->event) {
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
        err = ECONNREFUSED;
        break;
      case RDMA_CM_EVENT_UNREACHABLE:
        err = ETIMEDOUT;
        break;
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
        err = EHOSTUNREACH;
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
        err = ECONNRESET;
        break;
      default:
        break;
    }
    std::string what = std::string("expected ") + rdma_event_str(want) +
                       ", got " + rdma_event_str(ev->event) + " (status " +
                       std::to_string(ev->status) + ")";
    rdma_ack_cm_event(ev);
    *out = nullptr;
    return Fail(error, err, what);
  }

  static bool CheckDevice(rdma_cm_id* id, std::string* error) {
    if (id->verbs == nullptr) {
      return Fail(error, ENODEV, "RDMA CM id has no device");
    }
    if (id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
      return Fail(error, EPROTONOSUPPORT,
                  std::string("device ") +
                      ibv_get_device_name(id->verbs->device) +
                      " is iWARP, which has no RDMA WRITE WITH IMMEDIATE; "
                      "the vsocket RDMA backend needs InfiniBand or RoCE");
    }
    return true;
  }

  // Creates the channel around `id` (and its own event channel `ec`):
  // comp channel, CQ, QP, receive ring, posted receives.  Takes ownership of
  // id and ec in every case (destroyed on failure).
  // `passive`: the id came from a CONNECT_REQUEST; reject it on failure so
  // the client hears at once instead of timing out.
  static std::unique_ptr<RdmaChannel> Prepare(rdma_cm_id* id,
                                              rdma_event_channel* ec,
                                              const ChannelOptions& opt,
                                              bool passive,
                                              std::string* error) {
    std::unique_ptr<RdmaChannel> ch(new RdmaChannel());
    ch->id_ = id;
    ch->ec_ = ec;
    ch->opt_ = opt;
    if (Setup(ch.get(), id, opt, error)) return ch;
    int e = errno;
    if (passive) rdma_reject(id, nullptr, 0);
    ch.reset();  // destroys whatever Setup created, the id and ec
    errno = e;
    return nullptr;
  }

  static bool Setup(RdmaChannel* ch, rdma_cm_id* id,
                    const ChannelOptions& opt, std::string* error) {
    if (ch->opt_.signal_every == 0 ||
        ch->opt_.signal_every > ch->opt_.send_queue_depth / 2) {
      ch->opt_.signal_every = std::max<uint32_t>(1, opt.send_queue_depth / 2);
    }
    if (!fifo::IsValidCapacity(opt.ring_capacity) ||
        opt.ring_capacity > kMaxRingCapacity) {
      Fail(error, EINVAL, "ring_capacity must be a power of two in [4 KiB, " +
                              std::to_string(kMaxRingCapacity >> 20) + " MiB]");
      return false;
    }
    if (!CheckDevice(id, error)) return false;
    ch->pool_ = MemoryPool::ForDevice(id->verbs, error);
    if (ch->pool_ == nullptr) return false;

    ch->cc_ = ibv_create_comp_channel(id->verbs);
    if (ch->cc_ == nullptr || !SetNonBlocking(ch->cc_->fd)) {
      Fail(error, errno ? errno : ENOMEM, "ibv_create_comp_channel");
      return false;
    }
    int cqe = static_cast<int>(opt.send_queue_depth + opt.recv_queue_depth);
    ch->cq_ = ibv_create_cq(id->verbs, cqe, nullptr, ch->cc_, 0);
    if (ch->cq_ == nullptr) {
      Fail(error, errno ? errno : ENOMEM, "ibv_create_cq");
      return false;
    }
    struct ibv_qp_init_attr attr = {};
    attr.send_cq = ch->cq_;
    attr.recv_cq = ch->cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 0;
    attr.cap.max_send_wr = opt.send_queue_depth;
    attr.cap.max_recv_wr = opt.recv_queue_depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = opt.inline_wanted;
    if (rdma_create_qp(id, ch->pool_->pd(), &attr) != 0) {
      // Some devices cap inline data lower: retry without inline.
      attr.cap.max_inline_data = 0;
      if (rdma_create_qp(id, ch->pool_->pd(), &attr) != 0) {
        Fail(error, errno, "rdma_create_qp");
        return false;
      }
    }
    ch->qp_ = id->qp;
    ch->max_inline_ = attr.cap.max_inline_data;  // what the device granted
    ch->opt_.send_queue_depth = std::min(opt.send_queue_depth,
                                         attr.cap.max_send_wr);

    // Receive ring: the data area alone is registered for the peer's writes
    // (its own MR); the control block stays out of the peer's reach.
    ch->rx_block_ = ch->pool_->Allocate(ArenaKind::kRing, opt.ring_capacity);
    if (ch->rx_block_.addr == nullptr) {
      Fail(error, errno ? errno : ENOMEM,
           "receive ring: registration failed or VSOCKET_RDMA_POOL_MB reached");
      return false;
    }
    ch->rx_cap_ = opt.ring_capacity;
    ch->rx_ctl_ = std::make_unique<fifo::RingControl>();
    ch->rx_ctl_->head.store(0);
    ch->rx_ctl_->tail.store(0);
    ch->rx_ctl_->reader_wake.store(0);
    ch->rx_ctl_->writer_wake.store(0);
    ch->rx_ctl_->flags.store(0);
    ch->consumer_.emplace(ch->rx_ctl_.get(), ch->rx_block_.addr,
                          ch->rx_cap_, &ch->rx_tail_);
    if (ch->PostRecvs(opt.recv_queue_depth) != 0) {
      Fail(error, errno, "ibv_post_recv");
      return false;
    }
    uint8_t ack_timeout = opt.ack_timeout;
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                        &ack_timeout, sizeof(ack_timeout)) != 0) {
      // Best effort: older kernels lack the option; the CM default applies.
      errno = 0;
    }
    return true;
  }

  static Hello OurHello(const RdmaChannel& ch) {
    Hello h;
    h.ring_data_addr = reinterpret_cast<uintptr_t>(ch.rx_block_.addr);
    h.rkey = ch.rx_block_.rkey;
    h.capacity = ch.rx_cap_;
    return h;
  }

  // Sets up the send side for the peer's (validated) ring.
  static bool AttachPeer(RdmaChannel* ch, const Hello& peer,
                         std::string* error) {
    ch->tx_block_ = ch->pool_->Allocate(ArenaKind::kBounce, peer.capacity);
    if (ch->tx_block_.addr == nullptr) {
      return Fail(error, ENOMEM, "send mirror: bounce arena exhausted");
    }
    ch->tx_cap_ = peer.capacity;
    ch->peer_ring_addr_ = peer.ring_data_addr;
    ch->peer_rkey_ = peer.rkey;
    ch->tx_ctl_.head.store(0);
    ch->tx_ctl_.tail.store(0);
    ch->producer_.emplace(&ch->tx_ctl_, ch->tx_block_.addr, ch->tx_cap_,
                          &ch->tx_head_);
    return true;
  }

  static void ConnParam(const uint8_t* hello, struct rdma_conn_param* p) {
    std::memset(p, 0, sizeof(*p));
    p->private_data = hello;
    p->private_data_len = kHelloBytes;
    p->responder_resources = 0;  // nobody issues RDMA READ
    p->initiator_depth = 0;
    p->retry_count = 7;
    p->rnr_retry_count = 7;  // receives are re-posted as completions drain
  }

  static void MarkConnected(RdmaChannel* ch) { ch->connected_ = true; }
};

std::unique_ptr<RdmaChannel> RdmaConnect(const struct sockaddr_in& server,
                                         const ChannelOptions& options,
                                         std::string* error) {
  int64_t deadline = MonotonicNs() + options.connect_timeout_ns;
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr) {
    Fail(error, errno ? errno : ENODEV, "rdma_create_event_channel");
    return nullptr;
  }
  SetNonBlocking(ec->fd);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP) != 0) {
    int e = errno;
    rdma_destroy_event_channel(ec);
    Fail(error, e, "rdma_create_id");
    return nullptr;
  }
  auto cleanup = [&] {
    int e = errno;
    if (id != nullptr) rdma_destroy_id(id);
    rdma_destroy_event_channel(ec);
    errno = e;
  };
  rdma_cm_event* ev = nullptr;
  int resolve_ms = static_cast<int>(options.connect_timeout_ns / 1'000'000);
  struct sockaddr_in dst = server;
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst),
                        resolve_ms) != 0) {
    Fail(error, errno, "rdma_resolve_addr");
    cleanup();
    return nullptr;
  }
  if (!ChannelBuilder::Expect(ec, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, &ev,
                              error)) {
    cleanup();
    return nullptr;
  }
  rdma_ack_cm_event(ev);
  if (!ChannelBuilder::CheckDevice(id, error)) {
    cleanup();
    return nullptr;
  }
  if (rdma_resolve_route(id, resolve_ms) != 0) {
    Fail(error, errno, "rdma_resolve_route");
    cleanup();
    return nullptr;
  }
  if (!ChannelBuilder::Expect(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, &ev,
                              error)) {
    cleanup();
    return nullptr;
  }
  rdma_ack_cm_event(ev);

  // From here the channel owns id and ec.
  std::unique_ptr<RdmaChannel> ch =
      ChannelBuilder::Prepare(id, ec, options, /*passive=*/false, error);
  if (ch == nullptr) return nullptr;  // ch's destructor released id and ec
  // Setup above is local work (the first connection of a process also
  // registers the memory pool): the wait for the peer starts now.
  deadline = MonotonicNs() + options.connect_timeout_ns;
  uint8_t hello[kHelloBytes];
  Hello ours = ChannelBuilder::OurHello(*ch);
  ours.tcp_port = options.hello_tcp_port;
  EncodeHello(ours, hello);
  struct rdma_conn_param param;
  ChannelBuilder::ConnParam(hello, &param);
  if (rdma_connect(id, &param) != 0) {
    Fail(error, errno, "rdma_connect");
    return nullptr;
  }
  if (!ChannelBuilder::Expect(ec, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev,
                              error)) {
    int e = errno;  // the channel's destructor must not hide why
    ch.reset();
    errno = e;
    return nullptr;
  }
  Hello peer;
  bool ok = DecodeHello(ev->param.conn.private_data,
                        ev->param.conn.private_data_len, &peer);
  rdma_ack_cm_event(ev);
  ChannelBuilder::MarkConnected(ch.get());
  if (!ok) {
    Fail(error, EPROTO, "server sent an invalid hello");
    ch->Close();
    errno = EPROTO;
    return nullptr;
  }
  if (!ChannelBuilder::AttachPeer(ch.get(), peer, error)) {
    int e = errno;
    ch->Close();
    errno = e;
    return nullptr;
  }
  return ch;
}

std::unique_ptr<RdmaListener> RdmaListener::Listen(
    const struct sockaddr_in& addr, int backlog, const ChannelOptions& options,
    std::string* error) {
  std::unique_ptr<RdmaListener> l(new RdmaListener());
  l->options_ = options;
  l->ec_ = rdma_create_event_channel();
  if (l->ec_ == nullptr) {
    Fail(error, errno ? errno : ENODEV, "rdma_create_event_channel");
    return nullptr;
  }
  SetNonBlocking(l->ec_->fd);
  if (rdma_create_id(l->ec_, &l->id_, nullptr, RDMA_PS_TCP) != 0) {
    l->id_ = nullptr;
    Fail(error, errno, "rdma_create_id");
    return nullptr;
  }
  struct sockaddr_in a = addr;
  if (rdma_bind_addr(l->id_, reinterpret_cast<sockaddr*>(&a)) != 0) {
    Fail(error, errno, "rdma_bind_addr");
    return nullptr;
  }
  if (l->id_->verbs != nullptr && !ChannelBuilder::CheckDevice(l->id_, error)) {
    return nullptr;
  }
  if (rdma_listen(l->id_, backlog) != 0) {
    Fail(error, errno, "rdma_listen");
    return nullptr;
  }
  return l;
}

RdmaListener::~RdmaListener() {
  if (id_ != nullptr) rdma_destroy_id(id_);
  if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
}

uint16_t RdmaListener::port() const { return ntohs(rdma_get_src_port(id_)); }

void RdmaListener::RejectPending() {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(ec_, &ev) == 0) {
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_cm_id* id = ev->id;
      rdma_ack_cm_event(ev);
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
    } else {
      rdma_ack_cm_event(ev);
    }
  }
}

std::unique_ptr<RdmaChannel> RdmaListener::Accept(
    int64_t timeout_ns, std::string* error, PeerInfo* peer_info,
    const std::function<bool(const PeerInfo&)>& on_request) {
  int64_t wait_deadline = timeout_ns < 0 ? -1 : MonotonicNs() + timeout_ns;
  rdma_cm_event* ev = nullptr;
  for (;;) {
    if (!ChannelBuilder::NextEvent(ec_, wait_deadline, &ev, error)) {
      if (errno == ETIMEDOUT) errno = EAGAIN;
      return nullptr;
    }
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    rdma_ack_cm_event(ev);  // e.g. a late event for a rejected request
  }
  rdma_cm_id* id = ev->id;
  Hello peer;
  bool hello_ok = DecodeHello(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, &peer);
  rdma_ack_cm_event(ev);
  if (peer_info != nullptr) {
    *peer_info = PeerInfo();
    if (sockaddr* a = rdma_get_peer_addr(id)) {
      size_t len = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                            : sizeof(sockaddr_in);
      std::memcpy(&peer_info->addr, a, len);
    }
    if (hello_ok) peer_info->tcp_port = peer.tcp_port;
  }
  std::string device_error;
  if (!hello_ok || !ChannelBuilder::CheckDevice(id, &device_error)) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    Fail(error, hello_ok ? EPROTONOSUPPORT : EPROTO,
         hello_ok ? device_error : "client sent an invalid hello; rejected");
    return nullptr;
  }
  if (on_request) {
    PeerInfo info;
    if (peer_info != nullptr) info = *peer_info;
    if (!on_request(info)) {
      int e = errno;
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      Fail(error, e, "refused before setup");
      return nullptr;
    }
  }
  int64_t deadline = MonotonicNs() + options_.connect_timeout_ns;
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr || rdma_migrate_id(id, ec) != 0) {
    int e = errno ? errno : ENOMEM;
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    if (ec != nullptr) rdma_destroy_event_channel(ec);
    Fail(error, e, "rdma_migrate_id");
    return nullptr;
  }
  SetNonBlocking(ec->fd);
  std::unique_ptr<RdmaChannel> ch =
      ChannelBuilder::Prepare(id, ec, options_, /*passive=*/true, error);
  if (ch == nullptr) return nullptr;  // rejected; id and ec destroyed
  if (!ChannelBuilder::AttachPeer(ch.get(), peer, error)) {
    int e = errno;
    rdma_reject(id, nullptr, 0);
    errno = e;
    return nullptr;
  }
  uint8_t hello[kHelloBytes];
  EncodeHello(ChannelBuilder::OurHello(*ch), hello);
  struct rdma_conn_param param;
  ChannelBuilder::ConnParam(hello, &param);
  if (rdma_accept(id, &param) != 0) {
    Fail(error, errno, "rdma_accept");
    return nullptr;
  }
  if (!ChannelBuilder::Expect(ec, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev,
                              error)) {
    return nullptr;
  }
  rdma_ack_cm_event(ev);
  ChannelBuilder::MarkConnected(ch.get());
  return ch;
}

}  // namespace vsocket::rdma
