#include "rdma_backend/rdma_link.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/real_libc.h"
#include "rdma_backend/cm_events.h"
#include "rdma_backend/memory_pool.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {
namespace {

using ::vsocket::MonotonicNs;

// Control buffers: one per receive WR and per send WR (when SENDs cannot go
// inline), each large enough for a control message.
constexpr uint32_t kCtlBuf = 64;
static_assert(link::kControlBytes <= kCtlBuf);

// wr_id layout.  Receives: kRecvBit | qp << 32 | buffer index.  Signalled
// sends: qp << 32 | WRs covered, plus kCloseBit | slot << 40 for a slot's
// last message (its slices are freed once the NIC is done with them).
constexpr uint64_t kRecvBit = 1ull << 63;
constexpr uint64_t kCloseBit = 1ull << 62;
constexpr uint64_t kForceBit = 1ull << 61;
inline uint8_t WrQp(uint64_t id) { return static_cast<uint8_t>(id >> 32); }
inline uint16_t WrSlot(uint64_t id) { return static_cast<uint16_t>(id >> 40); }

void LinkConnParam(const uint8_t* hello, rdma_conn_param* p) {
  std::memset(p, 0, sizeof(*p));
  p->private_data = hello;
  p->private_data_len = link::kLinkHelloBytes;
  p->retry_count = 7;
  p->rnr_retry_count = 7;  // receives are re-posted as completions drain
}

uint64_t RandomLinkId() {
  uint64_t id = 0;
  while (id == 0) {
    if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
      id = static_cast<uint64_t>(MonotonicNs()) ^
           (static_cast<uint64_t>(::getpid()) << 40);
    }
  }
  return id;
}

}  // namespace

// ---------------------------------------------------------------- setup

bool RdmaLink::InitShared(ibv_context* verbs, std::string* error) {
  pool_ = MemoryPool::ForDevice(verbs, error);
  if (pool_ == nullptr) return false;
  pd_ = pool_->pd();
  cc_ = ibv_create_comp_channel(verbs);
  if (cc_ == nullptr || !CmSetNonBlocking(cc_->fd)) {
    return CmFail(error, errno ? errno : ENOMEM, "ibv_create_comp_channel");
  }
  int cqe = static_cast<int>((opt_.send_queue_depth + opt_.recv_queue_depth) *
                             opt_.qps);
  cq_ = ibv_create_cq(verbs, cqe, nullptr, cc_, 0);
  if (cq_ == nullptr) return CmFail(error, errno ? errno : ENOMEM, "ibv_create_cq");
  rx_slab_ = std::make_unique<LinkSlab>(
      pd_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, opt_.chunk_bytes,
      opt_.limit_bytes);
  tx_slab_ = std::make_unique<LinkSlab>(pd_, IBV_ACCESS_LOCAL_WRITE,
                                        opt_.chunk_bytes, opt_.limit_bytes);
  slots_.assign(opt_.slots, Slot());
  slot_frees_.assign(opt_.slots, 0);
  touched_flag_.assign(opt_.slots, 0);
  free_slots_.clear();
  for (uint32_t s = opt_.slots; s > 0; --s) {
    free_slots_.push_back(static_cast<uint16_t>(s - 1));
  }
  return true;
}

static size_t CtlSlice(uint32_t count) {
  size_t bytes = 64;
  while (bytes < static_cast<size_t>(count) * kCtlBuf) bytes <<= 1;
  return bytes;
}

bool RdmaLink::AddQp(rdma_cm_id* id, std::string* error) {
  qps_.push_back(Qp());
  Qp& q = qps_.back();
  q.id = id;
  ibv_qp_init_attr attr;
  if (!CreateRcQp(id, pd_, cq_, opt_.send_queue_depth, opt_.recv_queue_depth,
                  opt_.inline_wanted, &attr, error)) {
    return false;
  }
  q.max_inline = attr.cap.max_inline_data;
  if (!tx_slab_->Allocate(CtlSlice(opt_.recv_queue_depth), &q.recv_bufs) ||
      !tx_slab_->Allocate(CtlSlice(opt_.send_queue_depth), &q.send_bufs)) {
    return CmFail(error, ENOMEM, "link control buffers");
  }
  uint8_t index = static_cast<uint8_t>(qps_.size() - 1);
  for (uint32_t i = 0; i < opt_.recv_queue_depth; ++i) {
    if (PostRecv(index, i) != 0) return CmFail(error, errno, "ibv_post_recv");
  }
  uint8_t ack_timeout = opt_.ack_timeout;
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                      &ack_timeout, sizeof(ack_timeout)) != 0) {
    errno = 0;  // best effort: older kernels lack the option
  }
  return true;
}

std::shared_ptr<RdmaLink> RdmaLink::Connect(const sockaddr_in& server,
                                            const LinkOptions& options,
                                            std::string* error) {
  if (options.qps < 1 || options.qps > link::kMaxQpsPerLink ||
      options.slots < 1 || options.slots > link::kMaxSlots) {
    CmFail(error, EINVAL, "link options");
    return nullptr;
  }
  std::shared_ptr<RdmaLink> l(new RdmaLink(/*server=*/false, options));
  l->link_id_ = RandomLinkId();
  l->ec_ = rdma_create_event_channel();
  if (l->ec_ == nullptr) {
    CmFail(error, errno ? errno : ENODEV, "rdma_create_event_channel");
    return nullptr;
  }
  CmSetNonBlocking(l->ec_->fd);
  for (uint8_t i = 0; i < options.qps; ++i) {
    rdma_cm_id* id = nullptr;
    if (!ResolveCmIdOn(l->ec_, server, options.connect_timeout_ns, &id, error)) {
      return nullptr;
    }
    if (i == 0 && !l->InitShared(id->verbs, error)) {
      int e = errno;
      rdma_destroy_id(id);
      errno = e;
      return nullptr;
    }
    if (!l->AddQp(id, error)) return nullptr;  // the destructor takes id
    int64_t deadline = MonotonicNs() + options.connect_timeout_ns;
    link::LinkHello ours;
    ours.qp_index = i;
    ours.qp_count = options.qps;
    ours.slots = options.slots;
    ours.link_id = l->link_id_;
    uint8_t hello[link::kLinkHelloBytes];
    link::EncodeLinkHello(ours, hello);
    rdma_conn_param param;
    LinkConnParam(hello, &param);
    if (rdma_connect(id, &param) != 0) {
      CmFail(error, errno, "rdma_connect");
      return nullptr;
    }
    rdma_cm_event* ev = nullptr;
    if (!ExpectCmEvent(l->ec_, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev, error)) {
      return nullptr;
    }
    link::LinkHello peer;
    bool ok = link::DecodeLinkHello(ev->param.conn.private_data,
                                    ev->param.conn.private_data_len, &peer);
    rdma_ack_cm_event(ev);
    l->qps_[i].established = true;
    if (!ok || peer.link_id != l->link_id_ || peer.qp_index != i ||
        peer.qp_count != options.qps) {
      CmFail(error, EPROTO, "the server sent an invalid link hello");
      return nullptr;
    }
    l->peer_slots_ = peer.slots;
  }
  return l;
}

RdmaLink::~RdmaLink() {
  for (Qp& q : qps_) {
    if (q.established) rdma_disconnect(q.id);
  }
  for (Qp& q : qps_) {
    if (q.id->qp != nullptr) rdma_destroy_qp(q.id);
    rdma_destroy_id(q.id);
  }
  // Slices are in use by nobody now: the QPs are gone.
  rx_slab_.reset();
  tx_slab_.reset();
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (cc_ != nullptr) ibv_destroy_comp_channel(cc_);
  if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
}

// ------------------------------------------------------------- listener

std::unique_ptr<LinkListener> LinkListener::Listen(const sockaddr_in& addr,
                                                   const LinkOptions& options,
                                                   std::string* error) {
  std::unique_ptr<LinkListener> l(new LinkListener());
  l->options_ = options;
  if (!ListenCmId(addr, 128, &l->ec_, &l->id_, error)) return nullptr;
  return l;
}

LinkListener::~LinkListener() {
  partial_.clear();
  if (id_ != nullptr) rdma_destroy_id(id_);
  if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
}

uint16_t LinkListener::port() const { return ntohs(rdma_get_src_port(id_)); }

std::shared_ptr<RdmaLink> LinkListener::Accept(int64_t timeout_ns,
                                               std::string* error) {
  int64_t wait_deadline = timeout_ns < 0 ? -1 : MonotonicNs() + timeout_ns;
  rdma_cm_event* ev = nullptr;
  if (!NextCmEvent(ec_, wait_deadline, &ev, error)) {
    if (errno == ETIMEDOUT) errno = EAGAIN;
    return nullptr;
  }
  if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    rdma_ack_cm_event(ev);
    errno = EAGAIN;
    return nullptr;
  }
  return AcceptRequest(ev, error);
}

std::unique_ptr<LinkListener> LinkListener::ForRequests(const LinkOptions& options) {
  std::unique_ptr<LinkListener> l(new LinkListener());
  l->options_ = options;
  return l;
}

std::shared_ptr<RdmaLink> LinkListener::AcceptRequest(rdma_cm_event* ev,
                                                      std::string* error) {
  rdma_cm_id* id = ev->id;
  link::LinkHello hello;
  bool ok = link::DecodeLinkHello(ev->param.conn.private_data,
                                  ev->param.conn.private_data_len, &hello);
  rdma_ack_cm_event(ev);
  auto refuse = [&](int err, const std::string& what) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    CmFail(error, err, what);
    return nullptr;
  };
  if (!ok) return refuse(EPROTO, "not a valid link hello; rejected");
  std::string device_error;
  if (!CheckCmDevice(id, &device_error)) return refuse(EPROTONOSUPPORT, device_error);
  uint32_t peer_ip = 0;
  if (sockaddr* a = rdma_get_peer_addr(id); a != nullptr && a->sa_family == AF_INET) {
    peer_ip = reinterpret_cast<sockaddr_in*>(a)->sin_addr.s_addr;
  }
  auto key = std::make_pair(peer_ip, hello.link_id);
  std::shared_ptr<RdmaLink> l;
  if (hello.qp_index == 0) {
    if (partial_.count(key) != 0) return refuse(EPROTO, "link id reused");
    LinkOptions opt = options_;
    opt.qps = hello.qp_count;  // the client chooses, within the cap
    l.reset(new RdmaLink(/*server=*/true, opt));
    l->link_id_ = hello.link_id;
    l->peer_slots_ = hello.slots;
    l->ec_ = rdma_create_event_channel();
    if (l->ec_ == nullptr) return refuse(errno ? errno : ENOMEM, "rdma_create_event_channel");
    CmSetNonBlocking(l->ec_->fd);
    if (!l->InitShared(id->verbs, error)) return refuse(errno, *error);
    l->peer_open_.assign(hello.slots, RdmaLink::PeerOpen::kNone);
    l->peer_to_ours_.assign(hello.slots, link::kNoSlot);
  } else {
    auto it = partial_.find(key);
    if (it == partial_.end() || it->second->qps_.size() != hello.qp_index ||
        it->second->opt_.qps != hello.qp_count) {
      return refuse(EPROTO, "a link QP without its link");
    }
    l = it->second;
  }
  if (rdma_migrate_id(id, l->ec_) != 0) return refuse(errno, "rdma_migrate_id");
  if (!l->AddQp(id, error)) {  // the link owns id now
    rdma_reject(id, nullptr, 0);
    partial_.erase(key);
    return nullptr;
  }
  int64_t deadline = MonotonicNs() + options_.connect_timeout_ns;
  link::LinkHello ours = hello;
  ours.slots = l->opt_.slots;
  uint8_t bytes[link::kLinkHelloBytes];
  link::EncodeLinkHello(ours, bytes);
  rdma_conn_param param;
  LinkConnParam(bytes, &param);
  if (rdma_accept(id, &param) != 0 ||
      !ExpectCmEvent(l->ec_, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev, error)) {
    if (error->empty()) CmFail(error, errno, "rdma_accept");
    partial_.erase(key);
    return nullptr;
  }
  rdma_ack_cm_event(ev);
  l->qps_.back().established = true;
  if (l->qps_.size() < hello.qp_count) {
    partial_[key] = l;
    errno = EAGAIN;
    return nullptr;
  }
  partial_.erase(key);
  return l;
}

// ------------------------------------------------------------- posting

int RdmaLink::PostRecv(uint8_t qp, uint32_t index) {
  Qp& q = qps_[qp];
  ibv_sge sge = {reinterpret_cast<uintptr_t>(q.recv_bufs.addr + index * kCtlBuf),
                 kCtlBuf, q.recv_bufs.lkey};
  ibv_recv_wr wr = {};
  wr.wr_id = kRecvBit | (static_cast<uint64_t>(qp) << 32) | index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(q.id->qp, &wr, &bad);
  if (rc != 0) errno = rc;
  return rc == 0 ? 0 : -1;
}

int RdmaLink::ReserveLocked(uint8_t qp, uint32_t wrs) {
  // The NIC frees send-queue room without the peer's application: spin.
  // A dead peer frees nothing until the NIC's retries run out (~2.5 s on
  // rxe), while its disconnect shows on the CM descriptor at once: look
  // there too, as Poll() does (this thread holds mu_: nobody else can).
  uint32_t spins = 0;
  while (!dead_ && qps_[qp].sq_inflight + wrs > opt_.send_queue_depth) {
    PollLocked();
    if ((++spins & 63) == 0) HandleCmEventsLocked();
  }
  const bool polled = spins > 0;
  // What the spin filed for other connections (or this one, whose caller
  // may not look again soon) goes to the progress thread.
  if (polled) SignalTouchedLocked();
  if (dead_) {
    errno = ECONNRESET;
    return -1;
  }
  return 0;
}

int RdmaLink::PostSendLocked(uint8_t qp, ibv_send_wr* first, uint32_t count,
                             uint64_t tag) {
  if (ReserveLocked(qp, count) != 0) return -1;
  Qp& q = qps_[qp];
  ibv_send_wr* last = first;
  while (last->next != nullptr) last = last->next;
  q.unsignalled += count;
  if (tag != 0 || q.unsignalled >= opt_.signal_every) {
    last->send_flags |= IBV_SEND_SIGNALED;
    last->wr_id = tag | (static_cast<uint64_t>(qp) << 32) | q.unsignalled;
    q.unsignalled = 0;
  }
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(q.id->qp, first, &bad); rc != 0) {
    VSOCKET_LOG(kInfo, "rdma link: ibv_post_send: %s", strerror(rc));
    DieLocked("post failed");
    errno = ECONNRESET;
    return -1;
  }
  q.sq_inflight += count;
  return 0;
}

int RdmaLink::SendControlLocked(uint8_t qp, const link::Control& c) {
  Qp& q = qps_[qp];
  uint8_t msg[link::kControlBytes];
  link::EncodeControl(c, msg);
  ibv_sge sge = {reinterpret_cast<uintptr_t>(msg), link::kControlBytes, 0};
  ibv_send_wr wr = {};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (q.max_inline >= link::kControlBytes) {
    wr.send_flags = IBV_SEND_INLINE;
  } else {
    // A buffer is reused only after send_queue_depth later WRs were posted,
    // by which time this one completed (the queue holds no more).
    uint8_t* buf = q.send_bufs.addr +
                   (q.send_next++ % opt_.send_queue_depth) * kCtlBuf;
    std::memcpy(buf, msg, sizeof(msg));
    sge.addr = reinterpret_cast<uintptr_t>(buf);
    sge.lkey = q.send_bufs.lkey;
  }
  return PostSendLocked(qp, &wr, 1, 0);
}

int RdmaLink::PostToPeer(const LinkConnection& c, const ibv_sge* sges,
                         const uint64_t* peer_offsets, int n, uint32_t type,
                         uint32_t value, bool signal) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[c.slot];
  if (dead_ || s.state != SlotState::kOpen || s.sent_last) {
    errno = ECONNRESET;
    return -1;
  }
  ibv_sge sge[2];
  ibv_send_wr wr[2] = {};
  int count = n > 0 ? n : 1;
  for (int i = 0; i < count; ++i) {
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].wr.rdma.remote_addr = c.peer_ring_addr + (n > 0 ? peer_offsets[i] : 0);
    wr[i].wr.rdma.rkey = c.peer_rkey;
    if (n > 0) {
      sge[i] = sges[i];
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      if (sge[i].length <= qps_[s.qp].max_inline) wr[i].send_flags = IBV_SEND_INLINE;
    }
    wr[i].next = i + 1 < count ? &wr[i + 1] : nullptr;
  }
  wr[count - 1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr[count - 1].imm_data = htonl(link::MakeLinkImm(type, c.peer_slot, value));
  uint64_t tag = signal ? kForceBit | (static_cast<uint64_t>(c.slot) << 40) : 0;
  return PostSendLocked(s.qp, wr, static_cast<uint32_t>(count), tag);
}

// ------------------------------------------------------------- slots

bool RdmaLink::TakeSlotLocked(uint16_t* slot) {
  if (free_slots_.empty()) return false;
  *slot = free_slots_.back();
  free_slots_.pop_back();
  slots_[*slot] = Slot();
  return true;
}

void RdmaLink::FreeSlotLocked(uint16_t slot) {
  Slot& s = slots_[slot];
  if (s.conn.rx.addr != nullptr) rx_slab_->Free(s.conn.rx);
  if (s.conn.tx.addr != nullptr) tx_slab_->Free(s.conn.tx);
  if (server_ && s.conn.peer_slot < peer_open_.size()) {
    peer_open_[s.conn.peer_slot] = PeerOpen::kNone;
    peer_to_ours_[s.conn.peer_slot] = link::kNoSlot;
  }
  s = Slot();
  ++slot_frees_[slot];
  free_slots_.push_back(slot);
}

void RdmaLink::MaybeFreeSlotLocked(uint16_t slot) {
  const Slot& s = slots_[slot];
  if (s.state != SlotState::kFree && s.got_last && s.sent_last && s.close_done &&
      s.released) {
    FreeSlotLocked(slot);
  }
}

void RdmaLink::SendLastLocked(uint16_t slot, bool reset) {
  Slot& s = slots_[slot];
  if (s.sent_last) return;
  s.sent_last = true;
  if (dead_) {
    s.close_done = true;
    return;
  }
  ibv_send_wr wr = {};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(link::MakeLinkImm(
      kImmControl, s.conn.peer_slot, reset ? link::kCtlReset : kCtlClose));
  wr.wr.rdma.remote_addr = s.conn.peer_ring_addr;
  wr.wr.rdma.rkey = s.conn.peer_rkey;
  // Signalled and tagged: the slot's slices are freed at its completion,
  // once the NIC read every earlier WRITE from the mirror.
  PostSendLocked(s.qp, &wr, 1,
                 kCloseBit | (static_cast<uint64_t>(slot) << 40));
}

uint32_t RdmaLink::CloseConnection(const LinkConnection& c, bool reset) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c.slot >= slots_.size()) return 0;
  const uint32_t generation = slot_frees_[c.slot];
  if (slots_[c.slot].state != SlotState::kOpen || slots_[c.slot].released) {
    return generation;
  }
  SendLastLocked(c.slot, reset);
  slots_[c.slot].released = true;
  MaybeFreeSlotLocked(c.slot);
  return generation;
}

bool RdmaLink::LastMessageDone(const LinkConnection& c, uint32_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_ || c.slot >= slots_.size() || slot_frees_[c.slot] != generation ||
         slots_[c.slot].close_done;
}

void RdmaLink::TakeEvents(const LinkConnection& c, std::vector<SlotEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c.slot >= slots_.size()) return;
  std::vector<SlotEvent>& in = slots_[c.slot].inbox;
  out->insert(out->end(), in.begin(), in.end());
  in.clear();
  // Unlisted together with the take, under one lock: an event filed after
  // this lists the slot again.  (Unlisting later, in SignalTouched, once
  // stranded such an event: its slot unlisted, its inbox full, nobody told
  // -- a lost echo in rdma_soak_test.)
  UntouchLocked(c.slot);
}

void RdmaLink::UntouchLocked(uint16_t slot) {
  if (slot >= touched_flag_.size() || !touched_flag_[slot]) return;
  touched_flag_[slot] = 0;
  auto it = std::find(touched_.begin(), touched_.end(), slot);
  if (it != touched_.end()) {
    *it = touched_.back();
    touched_.pop_back();
  }
}

void RdmaLink::SignalTouchedLocked() {
  if (touched_.empty() && !(server_ && !opens_.empty())) return;
  if (wake_pending_ || wake_fd_ < 0) return;
  wake_pending_ = true;
  uint64_t one = 1;
  (void)!sys::write(wake_fd_, &one, sizeof(one));
}

void RdmaLink::DieLocked(const char* why) {
  if (dead_) return;
  dead_ = true;
  // The peer learns at once (its connections of this link are reset), not
  // when our last connection lets go of the link.
  for (Qp& q : qps_) {
    if (q.established) {
      q.established = false;
      rdma_disconnect(q.id);
    }
  }
  size_t open = 0;
  for (Slot& s : slots_) {
    if (s.state == SlotState::kFree) continue;
    ++open;
    if (s.state == SlotState::kOpening) s.answered = true;
    if (!s.got_last) {
      s.inbox.push_back({kImmControl, link::kCtlReset});
      s.got_last = true;
    }
    TouchLocked(s);
  }
  VSOCKET_LOG(kInfo, "rdma link %016llx: %s: %zu connection(s) reset",
              static_cast<unsigned long long>(link_id_), why, open);
}

void RdmaLink::SetWakeFd(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_fd_ = fd;
}

void RdmaLink::SignalTouched(uint16_t own_slot) {
  std::lock_guard<std::mutex> lock(mu_);
  // The own slot stays listed if events came after its TakeEvents.
  if (own_slot < slots_.size() && slots_[own_slot].inbox.empty()) {
    UntouchLocked(own_slot);
  }
  SignalTouchedLocked();
}

void RdmaLink::TakeTouched(std::vector<uint16_t>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_pending_ = false;
  for (uint16_t slot : touched_) {
    touched_flag_[slot] = 0;
    out->push_back(slot);
  }
  touched_.clear();
}

bool RdmaLink::PeerAddress(sockaddr_storage* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (qps_.empty() || qps_[0].id == nullptr) return false;
  sockaddr* a = rdma_get_peer_addr(qps_[0].id);
  if (a == nullptr || (a->sa_family != AF_INET && a->sa_family != AF_INET6)) return false;
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, a, a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  return true;
}

bool RdmaLink::HasOpens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !opens_.empty();
}

bool RdmaLink::dead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

size_t RdmaLink::slots_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size() - free_slots_.size();
}

size_t RdmaLink::registered_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rx_slab_->registered_bytes() + tx_slab_->registered_bytes();
}

uint64_t RdmaLink::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rx_slab_->registrations() + tx_slab_->registrations();
}

// ------------------------------------------------------- open / accept

int RdmaLink::Open(uint16_t tcp_port, uint32_t ring_bytes, int64_t deadline_ns,
                   LinkConnection* out, uint8_t* cause) {
  if (server_ || tcp_port == 0 || !fifo::IsValidCapacity(ring_bytes) ||
      ring_bytes > kMaxRingCapacity) {
    errno = EINVAL;
    return -1;
  }
  uint16_t slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_) {
      errno = ECONNRESET;
      return -1;
    }
    if (!TakeSlotLocked(&slot)) {
      errno = EBUSY;
      return -1;
    }
    Slot& s = slots_[slot];
    if (!rx_slab_->Allocate(ring_bytes, &s.conn.rx)) {
      FreeSlotLocked(slot);
      errno = ENOMEM;
      return -1;
    }
    s.state = SlotState::kOpening;
    s.qp = static_cast<uint8_t>(slot % qps_.size());
    s.conn.slot = slot;
    s.conn.tcp_port = tcp_port;
    link::Control open;
    open.op = link::ControlOp::kOpen;
    open.tcp_port = tcp_port;
    open.from_slot = slot;
    open.rkey = s.conn.rx.rkey;
    open.capacity = s.conn.rx.size;
    open.ring_addr = reinterpret_cast<uintptr_t>(s.conn.rx.addr);
    if (SendControlLocked(s.qp, open) != 0) return -1;
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Slot& s = slots_[slot];
      if (dead_) {
        errno = ECONNRESET;
        return -1;
      }
      if (s.answered && s.state == SlotState::kOpen) {
        if (s.conn.peer_capacity > kMaxRingCapacity ||
            !tx_slab_->Allocate(s.conn.peer_capacity, &s.conn.tx)) {
          SendLastLocked(slot, /*reset=*/true);
          s.released = true;
          MaybeFreeSlotLocked(slot);
          errno = ENOMEM;
          return -1;
        }
        *out = s.conn;
        return 0;
      }
      if (s.answered) {  // DECLINE: the server's last message
        if (cause != nullptr) *cause = s.cause;
        FreeSlotLocked(slot);
        errno = ECONNREFUSED;
        return -1;
      }
      if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns) {
        link::Control cancel;
        cancel.op = link::ControlOp::kCancel;
        cancel.from_slot = slot;
        s.state = SlotState::kCancelled;
        s.sent_last = true;
        s.close_done = true;  // no WR of ours reads its slices
        s.released = true;
        SendControlLocked(s.qp, cancel);
        break;
      }
    }
    Wait(deadline_ns);
    SignalTouched(link::kNoSlot);  // what the wait filed for others
  }
  WaitForCancelAnswer(slot);
  errno = ETIMEDOUT;
  return -1;
}

void RdmaLink::WaitForCancelAnswer(uint16_t slot) {
  // The caller goes to TCP next, and the server's accept() pairs by the
  // TCP connection: it must not find a parked connection the server still
  // thinks the client wants (the client on TCP, the server on a reset RDMA
  // connection: kill_loop_test saw it).  So the TCP SYN waits until the
  // server answered the CANCEL (DECLINE, or RESET after an ACCEPT: its
  // parked copy is reset by then), which frees our slot.  A server that
  // does not answer within kCancelAnswerNs cannot be trusted with this
  // link: it is closed (the server resets its connections).
  constexpr int64_t kCancelAnswerNs = 2'000'000'000;
  const int64_t deadline = MonotonicNs() + kCancelAnswerNs;
  uint32_t frees;
  {
    std::lock_guard<std::mutex> lock(mu_);
    frees = slot_frees_[slot];
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (dead_ || slot_frees_[slot] != frees) return;
      if (MonotonicNs() >= deadline) {
        DieLocked("no answer to a CANCEL");
        return;
      }
    }
    Wait(deadline);
    SignalTouched(link::kNoSlot);
  }
}

bool RdmaLink::NextOpen(OpenRequest* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (opens_.empty()) return false;
  *out = opens_.front();
  opens_.pop_front();
  return true;
}

void RdmaLink::DeclineOpen(const OpenRequest& req, link::LinkDeclineCause cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (req.client_slot >= peer_open_.size() ||
      peer_open_[req.client_slot] == PeerOpen::kAccepted ||
      peer_open_[req.client_slot] == PeerOpen::kNone) {
    return;
  }
  peer_open_[req.client_slot] = PeerOpen::kNone;
  link::Control d;
  d.op = link::ControlOp::kDecline;
  d.cause = static_cast<uint8_t>(cause);
  d.to_slot = req.client_slot;
  if (!dead_) SendControlLocked(req.qp, d);
}

int RdmaLink::AcceptOpen(const OpenRequest& req, uint32_t ring_bytes,
                         LinkConnection* out) {
  link::LinkDeclineCause cause = link::LinkDeclineCause::kMemory;
  int err = ENOMEM;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_) {
      errno = ECONNRESET;
      return -1;
    }
    if (req.client_slot >= peer_open_.size() ||
        peer_open_[req.client_slot] != PeerOpen::kQueued) {
      bool cancelled = req.client_slot < peer_open_.size() &&
                       peer_open_[req.client_slot] == PeerOpen::kCancelled;
      if (cancelled) {
        peer_open_[req.client_slot] = PeerOpen::kQueued;  // declined below
        cause = link::LinkDeclineCause::kListenerGone;
        err = ECANCELED;
      } else {
        errno = EINVAL;
        return -1;
      }
    } else {
      uint16_t slot;
      if (!TakeSlotLocked(&slot)) {
        cause = link::LinkDeclineCause::kSlotsFull;
        err = EBUSY;
      } else {
        Slot& s = slots_[slot];
        if (!fifo::IsValidCapacity(ring_bytes) ||
            !rx_slab_->Allocate(ring_bytes, &s.conn.rx) ||
            !tx_slab_->Allocate(req.capacity, &s.conn.tx)) {
          FreeSlotLocked(slot);
        } else {
          s.state = SlotState::kOpen;
          s.qp = req.qp;
          s.conn.slot = slot;
          s.conn.peer_slot = req.client_slot;
          s.conn.tcp_port = req.tcp_port;
          s.conn.peer_ring_addr = req.ring_addr;
          s.conn.peer_rkey = req.rkey;
          s.conn.peer_capacity = req.capacity;
          peer_open_[req.client_slot] = PeerOpen::kAccepted;
          peer_to_ours_[req.client_slot] = slot;
          link::Control a;
          a.op = link::ControlOp::kAccept;
          a.to_slot = req.client_slot;
          a.from_slot = slot;
          a.rkey = s.conn.rx.rkey;
          a.capacity = s.conn.rx.size;
          a.ring_addr = reinterpret_cast<uintptr_t>(s.conn.rx.addr);
          if (SendControlLocked(req.qp, a) != 0) return -1;
          *out = s.conn;
          return 0;
        }
      }
    }
  }
  DeclineOpen(req, cause);
  errno = err;
  return -1;
}

// ------------------------------------------------------- demultiplexing

void RdmaLink::HandleControl(uint8_t qp, const uint8_t* data, uint32_t len) {
  link::Control c;
  if (!link::DecodeControl(data, len, static_cast<uint32_t>(slots_.size()),
                           peer_slots_, &c)) {
    DieLocked("invalid control message");
    return;
  }
  using link::ControlOp;
  if (!server_ && (c.op == ControlOp::kAccept || c.op == ControlOp::kDecline)) {
    Slot& s = slots_[c.to_slot];
    if ((s.state != SlotState::kOpening && s.state != SlotState::kCancelled) ||
        s.answered || s.qp != qp) {
      DieLocked("answer to no OPEN");
      return;
    }
    s.answered = true;
    if (c.op == ControlOp::kDecline) {
      s.cause = c.cause;
      if (s.state == SlotState::kCancelled) FreeSlotLocked(c.to_slot);
      return;
    }
    s.conn.peer_slot = c.from_slot;
    s.conn.peer_ring_addr = c.ring_addr;
    s.conn.peer_rkey = c.rkey;
    s.conn.peer_capacity = c.capacity;
    if (s.state == SlotState::kOpening) s.state = SlotState::kOpen;
    return;
  }
  if (server_ && c.op == ControlOp::kOpen) {
    if (peer_open_[c.from_slot] == PeerOpen::kAccepted) {
      // The client frees its slot once its last message and ours crossed
      // and its own last WR completed, which may be before our last WR's
      // completion frees our slot (send and receive completions are not
      // ordered): its next OPEN for that slot is then legitimate.  Our old
      // slot forgets the client's slot and frees itself later.
      uint16_t ours = peer_to_ours_[c.from_slot];
      if (ours < slots_.size() && slots_[ours].got_last && slots_[ours].sent_last) {
        slots_[ours].conn.peer_slot = link::kNoSlot;
        peer_open_[c.from_slot] = PeerOpen::kNone;
        peer_to_ours_[c.from_slot] = link::kNoSlot;
      }
    }
    if (peer_open_[c.from_slot] != PeerOpen::kNone ||
        qp != c.from_slot % qps_.size()) {
      DieLocked("OPEN for a slot in use");
      return;
    }
    peer_open_[c.from_slot] = PeerOpen::kQueued;
    opens_.push_back({c.from_slot, c.tcp_port, qp, c.capacity, c.rkey,
                      c.ring_addr});
    return;
  }
  if (server_ && c.op == ControlOp::kCancel) {
    switch (peer_open_[c.from_slot]) {
      case PeerOpen::kQueued: {
        auto it = std::find_if(opens_.begin(), opens_.end(),
                               [&](const OpenRequest& r) {
                                 return r.client_slot == c.from_slot;
                               });
        if (it == opens_.end()) {  // taken by NextOpen, not answered yet
          peer_open_[c.from_slot] = PeerOpen::kCancelled;
          return;
        }
        opens_.erase(it);
        peer_open_[c.from_slot] = PeerOpen::kNone;
        link::Control d;
        d.op = ControlOp::kDecline;
        d.cause = static_cast<uint8_t>(link::LinkDeclineCause::kListenerGone);
        d.to_slot = c.from_slot;
        SendControlLocked(qp, d);
        return;
      }
      case PeerOpen::kAccepted: {
        uint16_t ours = peer_to_ours_[c.from_slot];
        Slot& s = slots_[ours];
        if (!s.got_last) s.inbox.push_back({kImmControl, link::kCtlReset});
        TouchLocked(s);
        s.got_last = true;  // the client sends nothing more for it
        SendLastLocked(ours, /*reset=*/true);
        return;
      }
      default:
        return;  // already declined
    }
  }
  DieLocked("control message in the wrong direction");
}

void RdmaLink::TouchLocked(Slot& s) {
  size_t slot = static_cast<size_t>(&s - slots_.data());
  if (slot >= touched_flag_.size() || touched_flag_[slot]) return;
  touched_flag_[slot] = 1;
  touched_.push_back(static_cast<uint16_t>(slot));
}

void RdmaLink::FileEventLocked(Slot& s, SlotEvent e) {
  std::vector<SlotEvent>& in = s.inbox;
  if (e.type == kImmControl && e.value == kCtlNop) return;  // nothing to apply
  TouchLocked(s);
  // Consecutive counts of one type add up (the connection's check of the
  // sum equals its checks one by one: nothing consumed in between), so
  // the inbox grows only with alternations, which credits bound for a
  // vsocket peer.  Past kMaxInbox the peer is flooding: that connection
  // is reset.
  if (!in.empty() && in.back().type == e.type &&
      (e.type == kImmData || e.type == kImmCredit || e.type == kSlotSendDone) &&
      in.back().value <= UINT32_MAX - e.value) {
    in.back().value += e.value;
    return;
  }
  if (in.size() >= kMaxInbox) {
    e = {kImmControl, link::kCtlReset};
    s.got_last = true;
  }
  if (e.type == kImmControl && e.value == link::kCtlReset && !in.empty() &&
      in.back().type == kImmControl && in.back().value == link::kCtlReset) {
    return;  // one RESET is enough
  }
  in.push_back(e);
}

void RdmaLink::HandleImm(uint32_t imm) {
  link::LinkImm in;
  if (!link::DecodeLinkImm(imm, static_cast<uint32_t>(slots_.size()), &in)) {
    DieLocked("invalid immediate");
    return;
  }
  Slot& s = slots_[in.slot];
  bool last = in.type == kImmControl &&
              (in.value == kCtlClose || in.value == link::kCtlReset);
  if (s.state == SlotState::kCancelled) {
    // Data the server sent before it saw our CANCEL: dropped.
    if (last) s.got_last = true;
  } else if (s.state != SlotState::kOpen) {
    DieLocked("immediate for a slot not open");
    return;
  } else if (s.got_last) {
    // After the peer's last message: that connection only.
    FileEventLocked(s, {kImmControl, link::kCtlReset});
    return;
  } else {
    FileEventLocked(s, {in.type, in.value});
    if (last) s.got_last = true;
  }
  MaybeFreeSlotLocked(in.slot);
}

void RdmaLink::HandleCompletion(const ibv_wc& wc) {
  if (wc.wr_id & kRecvBit) {
    uint8_t qp = WrQp(wc.wr_id);
    uint32_t index = static_cast<uint32_t>(wc.wr_id);
    if (wc.status != IBV_WC_SUCCESS || qp >= qps_.size()) {
      DieLocked("receive completion error");
      return;
    }
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM)) {
      HandleImm(ntohl(wc.imm_data));
    } else if (wc.opcode == IBV_WC_RECV) {
      HandleControl(qp, qps_[qp].recv_bufs.addr + index * kCtlBuf, wc.byte_len);
    } else {
      DieLocked("unexpected receive");
    }
    if (!dead_ && PostRecv(qp, index) != 0) DieLocked("ibv_post_recv failed");
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR) {
      VSOCKET_LOG(kInfo, "rdma link: completion error: %s",
                  ibv_wc_status_str(wc.status));
    }
    DieLocked("send completion error");
    return;
  }
  uint8_t qp = WrQp(wc.wr_id);
  if (qp >= qps_.size()) return;
  uint32_t covered = static_cast<uint32_t>(wc.wr_id);
  qps_[qp].sq_inflight -= std::min(covered, qps_[qp].sq_inflight);
  if ((wc.wr_id & kForceBit) && WrSlot(wc.wr_id) < slots_.size()) {
    Slot& s = slots_[WrSlot(wc.wr_id)];
    if (s.state == SlotState::kOpen) FileEventLocked(s, {kSlotSendDone, 1});
  }
  if (wc.wr_id & kCloseBit) {
    uint16_t slot = WrSlot(wc.wr_id);
    if (slot < slots_.size() && slots_[slot].sent_last) {
      slots_[slot].close_done = true;
      MaybeFreeSlotLocked(slot);
    }
  }
}

void RdmaLink::HandleCmEventsLocked() {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(ec_, &ev) == 0) {
    rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    rdma_ack_cm_event(ev);
    if (type != RDMA_CM_EVENT_DISCONNECTED &&
        type != RDMA_CM_EVENT_DEVICE_REMOVAL) {
      continue;
    }
    // What the peer sent before its disconnect request completed before
    // it (a CLOSE waited for by its Close(), then its exit): apply it
    // first, so that a connection it closed cleanly reads its end of
    // stream, not a reset (kill_loop_test).
    PollLocked();
    for (Qp& q : qps_) {
      if (q.id == id && q.established) {
        q.established = false;
        rdma_disconnect(q.id);  // answer the peer's request at once
      }
    }
    if (slots_.size() != free_slots_.size()) {
      DieLocked(rdma_event_str(type));
    } else {
      dead_ = true;  // a normal end: no connection was open
    }
  }
}

int RdmaLink::PollLocked() {
  int handled = 0;
  ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wcs);
    if (n < 0) {
      DieLocked("ibv_poll_cq failed");
      break;
    }
    for (int i = 0; i < n; ++i) HandleCompletion(wcs[i]);
    handled += n;
    if (n < 32) break;
  }
  return handled;
}

int RdmaLink::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  // A disconnect shows on the CM fd, not the CQ: a caller that only spins
  // still sees it (one read() per 64 polls).
  if ((++polls_ & 63) == 0) HandleCmEventsLocked();
  return PollLocked();
}

int RdmaLink::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  ibv_cq* ev_cq = nullptr;
  void* ctx = nullptr;
  while (cq_armed_ && ibv_get_cq_event(cc_, &ev_cq, &ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    cq_armed_ = false;
  }
  ArmLocked();
  return PollLocked();
}

int RdmaLink::ArmIfIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  ArmLocked();
  return PollLocked();
}

void RdmaLink::ArmLocked() {
  if (cq_armed_ || dead_) return;
  if (ibv_req_notify_cq(cq_, 0) != 0) {
    DieLocked("ibv_req_notify_cq failed");
  } else {
    cq_armed_ = true;
  }
}

void RdmaLink::PollCm() {
  std::lock_guard<std::mutex> lock(mu_);
  HandleCmEventsLocked();
}

int RdmaLink::Wait(int64_t deadline_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int n = PollLocked();
    if (n > 0 || dead_) return n;
    ArmLocked();
    if (dead_) return 0;
    n = PollLocked();
    if (n > 0) return n;
  }
  int timeout_ms = 1;
  if (deadline_ns >= 0 && deadline_ns - MonotonicNs() <= 0) timeout_ms = 0;
  pollfd fds[2] = {{cc_->fd, POLLIN, 0}, {ec_->fd, POLLIN, 0}};
  int rc = sys::poll(fds, 2, timeout_ms);
  std::lock_guard<std::mutex> lock(mu_);
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    ibv_cq* ev_cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(cc_, &ev_cq, &ctx) == 0) {
      ibv_ack_cq_events(ev_cq, 1);
      cq_armed_ = false;
      // The event may have been the progress thread's too (it watches the
      // same descriptor, which reads empty now): arm again before polling,
      // or the link's sleeping connections would wait for a completion
      // event nobody asked for.
      ArmLocked();
    }
  }
  if (rc > 0 && (fds[1].revents & POLLIN)) HandleCmEventsLocked();
  return PollLocked();
}

}  // namespace vsocket::rdma
