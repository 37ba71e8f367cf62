#include "rdma_backend/rdma_cm_connection.h"

#include "rdma_backend/link_wire.h"

#include "base/real_libc.h"
#include "rdma_backend/cm_events.h"
#include "vsocket/wait.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

namespace vsocket::rdma {
namespace {

using ::vsocket::DeadlineAfter;
using ::vsocket::MonotonicNs;

// A client id on its own event channel with the address and route to
// `server` resolved, both bounded by `timeout_ns`.  Returns false with errno
// and *error, having destroyed what it made.
bool ResolveClientId(const struct sockaddr_in& server, int64_t timeout_ns,
                     rdma_event_channel** ec_out, rdma_cm_id** id_out,
                     std::string* error) {
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr) {
    return CmFail(error, errno ? errno : ENODEV, "rdma_create_event_channel");
  }
  CmSetNonBlocking(ec->fd);
  if (!ResolveCmIdOn(ec, server, timeout_ns, id_out, error)) {
    int e = errno;
    rdma_destroy_event_channel(ec);
    errno = e;
    return false;
  }
  *ec_out = ec;
  return true;
}

}  // namespace

// Builds RdmaChannel objects for RdmaConnect and RdmaListener (a friend of
// RdmaChannel; not part of the public interface).
class ChannelBuilder {
 public:
  // Server: rejects a connection request our side refused with `err`.  A
  // memory shortage (ENOMEM, EPERM from a registration) is a decline with
  // the cause (wire_format.h), so the client reports it truthfully.
  static void Reject(rdma_cm_id* id, int err) {
    if (err != ENOMEM && err != EPERM) {
      rdma_reject(id, nullptr, 0);
      return;
    }
    uint8_t decline[kHelloBytes];
    EncodeDecline(0, DeclineCause::kMemoryLimit, decline);
    rdma_reject(id, decline, kHelloBytes);
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
    if (passive) Reject(id, e);
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
      CmFail(error, EINVAL, "ring_capacity must be a power of two in [4 KiB, " +
                              std::to_string(kMaxRingCapacity >> 20) + " MiB]");
      return false;
    }
    if (!CheckCmDevice(id, error)) return false;
    ch->pool_ = MemoryPool::ForDevice(id->verbs, error);
    if (ch->pool_ == nullptr) return false;

    ch->cc_ = ibv_create_comp_channel(id->verbs);
    if (ch->cc_ == nullptr || !CmSetNonBlocking(ch->cc_->fd)) {
      CmFail(error, errno ? errno : ENOMEM, "ibv_create_comp_channel");
      return false;
    }
    int cqe = static_cast<int>(opt.send_queue_depth + opt.recv_queue_depth);
    ch->cq_ = ibv_create_cq(id->verbs, cqe, nullptr, ch->cc_, 0);
    if (ch->cq_ == nullptr) {
      CmFail(error, errno ? errno : ENOMEM, "ibv_create_cq");
      return false;
    }
    struct ibv_qp_init_attr attr;
    if (!CreateRcQp(id, ch->pool_->pd(), ch->cq_, opt.send_queue_depth,
                    opt.recv_queue_depth, opt.inline_wanted, &attr, error)) {
      return false;
    }
    ch->qp_ = id->qp;
    ch->max_inline_ = attr.cap.max_inline_data;  // what the device granted
    ch->opt_.send_queue_depth = std::min(opt.send_queue_depth,
                                         attr.cap.max_send_wr);

    // Receive ring: the data area alone is registered for the peer's writes
    // (its own MR); the control block stays out of the peer's reach.
    ch->rx_block_ = ch->pool_->Allocate(ArenaKind::kRing, opt.ring_capacity);
    if (ch->rx_block_.addr == nullptr) {
      CmFail(error, errno ? errno : ENOMEM,
           "receive ring: registration failed or VSOCKET_RDMA_POOL_MB reached");
      return false;
    }
    ch->InitReceiveRing(opt.ring_capacity);
    if (ch->PostRecvs(opt.recv_queue_depth) != 0) {
      CmFail(error, errno, "ibv_post_recv");
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
      return CmFail(error, ENOMEM, "send mirror: bounce arena exhausted");
    }
    ch->InitSendRing(peer.ring_data_addr, peer.rkey, peer.capacity);
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

namespace {

}  // namespace

std::unique_ptr<RdmaChannel> RdmaConnect(const struct sockaddr_in& server,
                                         const ChannelOptions& options,
                                         std::string* error) {
  rdma_event_channel* ec = nullptr;
  rdma_cm_id* id = nullptr;
  if (!ResolveClientId(server, options.connect_timeout_ns, &ec, &id, error)) {
    return nullptr;
  }
  rdma_cm_event* ev = nullptr;
  // From here the channel owns id and ec.
  std::unique_ptr<RdmaChannel> ch =
      ChannelBuilder::Prepare(id, ec, options, /*passive=*/false, error);
  if (ch == nullptr) return nullptr;  // ch's destructor released id and ec
  // Setup above is local work (the first connection of a process also
  // registers the memory pool): the wait for the peer starts now.
  int64_t deadline = MonotonicNs() + options.connect_timeout_ns;
  uint8_t hello[kHelloBytes];
  Hello ours = ChannelBuilder::OurHello(*ch);
  ours.tcp_port = options.hello_tcp_port;
  EncodeHello(ours, hello);
  struct rdma_conn_param param;
  ChannelBuilder::ConnParam(hello, &param);
  if (rdma_connect(id, &param) != 0) {
    CmFail(error, errno, "rdma_connect");
    return nullptr;
  }
  if (!ExpectCmEvent(ec, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev,
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
    CmFail(error, EPROTO, "server sent an invalid hello");
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

void RdmaSendDecline(const struct sockaddr_in& server, uint16_t tcp_port,
                     DeclineCause cause, int64_t timeout_ns) {
  rdma_event_channel* ec = nullptr;
  rdma_cm_id* id = nullptr;
  std::string error;
  if (!ResolveClientId(server, timeout_ns, &ec, &id, &error)) return;
  int64_t deadline = MonotonicNs() + timeout_ns;
  uint8_t decline[kHelloBytes];
  EncodeDecline(tcp_port, cause, decline);
  struct rdma_conn_param param;
  ChannelBuilder::ConnParam(decline, &param);
  // No QP: the CM REQ names one anyway.  The passive CM rejects a REQ whose
  // (source GID, QPN) a live connection uses ("stale connection"), so the
  // number is taken from the top of the 24-bit space, far from the numbers
  // devices hand out first, and varies between concurrent declines.
  static std::atomic<uint32_t> next{0};
  param.qp_num = 0xffffff - (next.fetch_add(1, std::memory_order_relaxed) & 0xffff);
  rdma_cm_event* ev = nullptr;
  if (rdma_connect(id, &param) == 0 &&
      NextCmEvent(ec, deadline, &ev, &error)) {
    rdma_ack_cm_event(ev);  // REJECTED, from a vsocket server or any other
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ec);
}

std::unique_ptr<RdmaListener> RdmaListener::Listen(
    const struct sockaddr_in& addr, int backlog, const ChannelOptions& options,
    std::string* error) {
  std::unique_ptr<RdmaListener> l(new RdmaListener());
  l->options_ = options;
  if (!ListenCmId(addr, backlog, &l->ec_, &l->id_, error)) return nullptr;
  return l;
}

RdmaListener::~RdmaListener() {
  if (id_ != nullptr) rdma_destroy_id(id_);
  if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
}

uint16_t RdmaListener::port() const { return ntohs(rdma_get_src_port(id_)); }

std::unique_ptr<RdmaChannel> RdmaListener::Accept(
    int64_t timeout_ns, std::string* error, PeerInfo* peer_info,
    const std::function<bool(const PeerInfo&)>& on_request) {
  int64_t wait_deadline = timeout_ns < 0 ? -1 : MonotonicNs() + timeout_ns;
  rdma_cm_event* ev = nullptr;
  for (;;) {
    if (!NextCmEvent(ec_, wait_deadline, &ev, error)) {
      if (errno == ETIMEDOUT) errno = EAGAIN;
      return nullptr;
    }
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    rdma_ack_cm_event(ev);  // e.g. a late event for a rejected request
  }
  rdma_cm_id* id = ev->id;
  if (link_handler_) {
    link::LinkHello link_hello;
    if (link::DecodeLinkHello(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, &link_hello)) {
      link_handler_(ev);  // acknowledges ev
      errno = EINPROGRESS;
      return nullptr;
    }
  }
  Hello peer;
  bool hello_ok = DecodeHello(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, &peer);
  uint16_t declined_port = 0;
  uint8_t declined_cause = 0;
  bool declined = !hello_ok && DecodeDecline(ev->param.conn.private_data,
                                             ev->param.conn.private_data_len,
                                             &declined_port, &declined_cause);
  rdma_ack_cm_event(ev);
  PeerInfo info;
  if (sockaddr* a = rdma_get_peer_addr(id)) {
    size_t len = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                          : sizeof(sockaddr_in);
    std::memcpy(&info.addr, a, len);
  }
  if (hello_ok) info.tcp_port = peer.tcp_port;
  if (declined) {
    info.tcp_port = declined_port;
    info.declined = declined_cause;
  }
  if (peer_info != nullptr) *peer_info = info;
  if (declined) {
    // Recorded (on_request) before the rejection: the client's SYN follows
    // the rejection at once.
    if (on_request) on_request(info);
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    CmFail(error, ECANCELED, "the client declined RDMA (cause " +
                               std::to_string(declined_cause) + ")");
    return nullptr;
  }
  std::string device_error;
  if (!hello_ok || !CheckCmDevice(id, &device_error)) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    CmFail(error, hello_ok ? EPROTONOSUPPORT : EPROTO,
         hello_ok ? device_error : "client sent an invalid hello; rejected");
    return nullptr;
  }
  if (on_request && !on_request(info)) {
    int e = errno;
    ChannelBuilder::Reject(id, e);
    rdma_destroy_id(id);
    CmFail(error, e, "refused before setup");
    return nullptr;
  }
  int64_t deadline = MonotonicNs() + options_.connect_timeout_ns;
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr || rdma_migrate_id(id, ec) != 0) {
    int e = errno ? errno : ENOMEM;
    ChannelBuilder::Reject(id, e);
    rdma_destroy_id(id);
    if (ec != nullptr) rdma_destroy_event_channel(ec);
    CmFail(error, e, "rdma_migrate_id");
    return nullptr;
  }
  CmSetNonBlocking(ec->fd);
  std::unique_ptr<RdmaChannel> ch =
      ChannelBuilder::Prepare(id, ec, options_, /*passive=*/true, error);
  if (ch == nullptr) return nullptr;  // rejected; id and ec destroyed
  if (!ChannelBuilder::AttachPeer(ch.get(), peer, error)) {
    int e = errno;
    ChannelBuilder::Reject(id, e);
    errno = e;
    return nullptr;
  }
  uint8_t hello[kHelloBytes];
  EncodeHello(ChannelBuilder::OurHello(*ch), hello);
  struct rdma_conn_param param;
  ChannelBuilder::ConnParam(hello, &param);
  if (rdma_accept(id, &param) != 0) {
    CmFail(error, errno, "rdma_accept");
    return nullptr;
  }
  if (!ExpectCmEvent(ec, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev,
                              error)) {
    return nullptr;
  }
  rdma_ack_cm_event(ev);
  ChannelBuilder::MarkConnected(ch.get());
  return ch;
}

}  // namespace vsocket::rdma
