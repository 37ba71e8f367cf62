#include "rdma_backend/rdma_channel.h"

#include "vsocket/iovec_util.h"
#include "vsocket/log.h"
#include "base/real_libc.h"
#include "vsocket/wait.h"
#include <arpa/inet.h>
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace vsocket::rdma {
namespace {

using ::vsocket::DeadlineAfter;
using ::vsocket::MonotonicNs;

uint64_t IovTotal(const struct iovec* iov, int iovcnt) {
  return ::vsocket::IovTotal(iov, static_cast<size_t>(iovcnt));
}

}  // namespace

UserRegion::~UserRegion() {
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
}

RdmaChannel::~RdmaChannel() { Close(); }

int RdmaChannel::completion_fd() const {
  if (link_) return link_->completion_fd();
  return cc_ ? cc_->fd : -1;
}
int RdmaChannel::cm_fd() const {
  if (link_) return link_->cm_fd();
  return ec_ ? ec_->fd : -1;
}

void RdmaChannel::InitReceiveRing(uint64_t capacity) {
  rx_cap_ = capacity;
  rx_ctl_ = std::make_unique<fifo::RingControl>();
  rx_ctl_->head.store(0);
  rx_ctl_->tail.store(0);
  rx_ctl_->reader_wake.store(0);
  rx_ctl_->writer_wake.store(0);
  rx_ctl_->flags.store(0);
  consumer_.emplace(rx_ctl_.get(), rx_block_.addr, rx_cap_, &rx_tail_);
}

void RdmaChannel::InitSendRing(uint64_t peer_ring_addr, uint32_t peer_rkey,
                               uint64_t capacity) {
  tx_cap_ = capacity;
  peer_ring_addr_ = peer_ring_addr;
  peer_rkey_ = peer_rkey;
  tx_ctl_.head.store(0);
  tx_ctl_.tail.store(0);
  producer_.emplace(&tx_ctl_, tx_block_.addr, tx_cap_, &tx_head_);
}

std::unique_ptr<RdmaChannel> RdmaChannel::OnLink(
    std::shared_ptr<RdmaLink> link, const LinkConnection& conn,
    MemoryPool* pool, const ChannelOptions& options) {
  std::unique_ptr<RdmaChannel> ch(new RdmaChannel());
  ch->opt_ = options;
  if (ch->opt_.signal_every == 0) ch->opt_.signal_every = 16;
  ch->link_ = std::move(link);
  ch->link_conn_ = conn;
  ch->pool_ = pool;
  // The slices belong to the link's slabs (no MR of their own): the link
  // frees them once both ends sent their last message.
  ch->rx_block_ = {conn.rx.addr, conn.rx.size, conn.rx.lkey, conn.rx.rkey,
                   ArenaKind::kRing, nullptr};
  ch->tx_block_ = {conn.tx.addr, conn.tx.size, conn.tx.lkey, 0,
                   ArenaKind::kBounce, nullptr};
  ch->InitReceiveRing(conn.rx.size);
  ch->InitSendRing(conn.peer_ring_addr, conn.peer_rkey, conn.peer_capacity);
  ch->connected_ = true;
  return ch;
}

size_t RdmaChannel::registered_bytes() const {
  return rx_block_.size + tx_block_.size + user_registered_;
}

void RdmaChannel::SetReset(int err) {
  if (error_ == 0) error_ = err;
  connected_ = false;
}

int RdmaChannel::FailCall() {
  errno = closed_ ? ENOTCONN : (error_ ? error_ : ECONNRESET);
  return -1;
}

int RdmaChannel::PostRecvs(uint32_t count) {
  if (link_) return 0;  // the link keeps its receives posted
  // Receives carry no scatter list: RDMA WRITE WITH IMM places the payload
  // by remote address and only consumes the WR for its immediate.
  struct ibv_recv_wr wrs[32];
  while (count > 0) {
    uint32_t n = std::min<uint32_t>(count, 32);
    for (uint32_t i = 0; i < n; ++i) {
      wrs[i] = {};
      wrs[i].wr_id = 0;
      wrs[i].sg_list = nullptr;
      wrs[i].num_sge = 0;
      wrs[i].next = (i + 1 < n) ? &wrs[i + 1] : nullptr;
    }
    struct ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(qp_, wrs, &bad);
    if (rc != 0) {
      errno = rc;
      return -1;
    }
    count -= n;
  }
  return 0;
}

void RdmaChannel::ApplyImm(uint32_t type, uint32_t value) {
  switch (type) {
    case kImmData: {
      // Valid only if it fits the free space the peer was allowed to use.
      if (value == 0 || peer_fin_ || rx_head_ - rx_tail_ + value > rx_cap_) {
        SetReset(ECONNRESET);
        return;
      }
      rx_head_ += value;
      rx_ctl_->head.store(rx_head_, std::memory_order_release);
      break;
    }
    case kImmCredit: {
      if (value == 0 || tx_tail_ + value > tx_head_) {
        SetReset(ECONNRESET);
        return;
      }
      tx_tail_ += value;
      tx_ctl_.tail.store(tx_tail_, std::memory_order_release);
      break;
    }
    case kImmControl:
      if (value == kCtlFin) {
        peer_fin_ = true;
      } else if (value == kCtlClose) {
        peer_fin_ = true;
        peer_closed_ = true;
      } else if (value != kCtlNop) {
        SetReset(ECONNRESET);  // RESET (links), or a value we never send
      }
      break;
    default:
      SetReset(ECONNRESET);
  }
}

void RdmaChannel::HandleCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    // Flush errors follow the first real error; all mean the QP is dead.
    // After an orderly close (ours or the peer's) the flushes are expected.
    if (!disconnecting_ && !peer_closed_) {
      if (error_ == 0) {
        VSOCKET_LOG(kInfo, "rdma: completion error: %s (opcode %d, vendor %u)",
                    ibv_wc_status_str(wc.status), wc.opcode, wc.vendor_err);
      }
      SetReset(ECONNRESET);
    }
    if (!(wc.opcode & IBV_WC_RECV)) {
      sq_inflight_ -= std::min(static_cast<uint32_t>(wc.wr_id), sq_inflight_);
      ++sig_done_;
    }
    return;
  }
  if (wc.opcode & IBV_WC_RECV) {
    ++recvs_to_post_;
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
        !(wc.wc_flags & IBV_WC_WITH_IMM)) {
      SetReset(ECONNRESET);  // the peer sent something we never ask for
      return;
    }
    uint32_t imm = ntohl(wc.imm_data);
    ApplyImm(imm & kImmTypeMask, imm & kImmValueMask);
    return;
  }
  // A signalled send completion covers every earlier WR (RC completes the
  // send queue in order); wr_id holds how many WRs that is.
  uint32_t covered = static_cast<uint32_t>(wc.wr_id);
  sq_inflight_ -= std::min(covered, sq_inflight_);
  ++sig_done_;
}

void RdmaChannel::HandleCmEvents() {
  if (link_) {
    // A dead link files a RESET for every slot; the next Progress() applies
    // it (taking the inbox here would hide events from a caller that waits
    // for Progress() to report them).
    link_->PollCm();
    return;
  }
  struct rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(ec_, &ev) == 0) {
    enum rdma_cm_event_type type = ev->event;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_DISCONNECTED ||
        type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      bool was_connected = connected_;
      // The peer's CLOSE, if it sent one, completed before its disconnect
      // request: drain the CQ so it is seen before deciding.
      if (was_connected) Progress();
      connected_ = false;
      // An orderly close (the peer's CLOSE arrived first, or we started the
      // disconnect) keeps buffered data readable; anything else is a reset.
      if (was_connected && !peer_closed_ && !disconnecting_) {
        VSOCKET_LOG(kInfo, "rdma: %s without the peer's close: reset",
                    rdma_event_str(type));
        SetReset(ECONNRESET);
      }
      // Answer the peer's disconnect request now (the DREP it waits for);
      // this also moves our QP to the error state.
      if (!disconnecting_) {
        disconnecting_ = true;
        rdma_disconnect(id_);
      }
    }
  }
}

int RdmaChannel::ProgressOnLink() {
  if (closed_) return 0;
  link_->Poll();
  link_events_.clear();
  link_->TakeEvents(link_conn_, &link_events_);
  // Events this poll filed for other connections go to the progress thread.
  link_->SignalTouched(link_conn_.slot);
  for (const SlotEvent& e : link_events_) {
    if (e.type == kSlotSendDone) {
      sig_done_ += e.value;  // signalled posts completed
    } else {
      ApplyImm(e.type, e.value);
    }
  }
  if (corked_bytes() > 0 && !MayCork()) FlushCorked(kNoSlotWait);
  return static_cast<int>(link_events_.size());
}

int RdmaChannel::Progress() {
  if (closed_) return 0;
  if (link_) return ProgressOnLink();
  int handled = 0;
  struct ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wcs);
    if (n < 0) {
      VSOCKET_LOG(kInfo, "rdma: ibv_poll_cq failed (%d)", n);
      SetReset(ECONNRESET);
      break;
    }
    for (int i = 0; i < n; ++i) HandleCompletion(wcs[i]);
    handled += n;
    if (n < 32) break;
  }
  if (recvs_to_post_ >= 16 || (handled > 0 && recvs_to_post_ > 0)) {
    if (error_ == 0 && PostRecvs(recvs_to_post_) != 0) {
      VSOCKET_LOG(kInfo, "rdma: ibv_post_recv: %s", strerror(errno));
      SetReset(ECONNRESET);
    }
    recvs_to_post_ = 0;
  }
  // The completion that corked sends waited for may have come.
  if (corked_bytes() > 0 && !MayCork()) FlushCorked(kNoSlotWait);
  return handled;
}

bool RdmaChannel::PrepareToSleep() {
  if (closed_ || error_ != 0) return false;
  last_call_was_send_ = false;
  // Nobody may sleep while bytes it sent wait unposted.
  FlushCorked(kNoSlotWait);
  if (link_) {
    link_->ArmIfIdle();
    return Progress() == 0 && error_ == 0;
  }
  // Consume completion events that fired since the last arm (an external
  // loop woke up on completion_fd() and does not read it itself); each one
  // means the CQ must be armed again, and leaving it unread would keep the
  // fd readable forever.  The fd is non-blocking.
  struct ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  while (cq_armed_ && ibv_get_cq_event(cc_, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    cq_armed_ = false;
  }
  if (!cq_armed_) {
    if (int rc = ibv_req_notify_cq(cq_, 0); rc != 0) {
      VSOCKET_LOG(kInfo, "rdma: ibv_req_notify_cq: %s", strerror(rc));
      SetReset(ECONNRESET);
      return false;
    }
    cq_armed_ = true;
  }
  // A completion that arrived before arming raises no event: poll once more.
  return Progress() == 0;
}

int RdmaChannel::WaitForProgress(int64_t deadline_ns) {
  if (error_ != 0 || closed_) return FailCall();
  FlushCorked(kNoSlotWait);  // a credit or slot may be waiting on them
  int64_t now = MonotonicNs();
  int64_t spin_end = now + call_spin_ns_;
  for (uint32_t i = 1;; ++i) {
    // A disconnect shows up on the CM fd, not the CQ: look at it at most
    // once per millisecond of busy-polling (a system call each time).
    if (now >= next_cm_check_ns_) {
      HandleCmEvents();
      next_cm_check_ns_ = now + 1'000'000;
      if (error_ != 0 || closed_) return FailCall();
    }
    if (Progress() > 0) return 0;
    if (error_ != 0) return FailCall();
    // The clock only every 16th look: where no vDSO clock exists (an
    // emulated guest's HPET) each read is a system call.
    if ((i & 15) != 0) continue;
    now = MonotonicNs();
    if (now >= spin_end || (deadline_ns >= 0 && now >= deadline_ns)) break;
  }
  HandleCmEvents();
  if (error_ != 0 || closed_) return FailCall();

  while (link_) {
    if (!PrepareToSleep()) return error_ != 0 ? FailCall() : 0;
    if (deadline_ns >= 0 && MonotonicNs() >= deadline_ns) {
      errno = EAGAIN;
      return -1;
    }
    link_->Wait(deadline_ns);  // at most 1 ms: other connections may take events
    if (Progress() > 0) return error_ != 0 ? FailCall() : 0;
    if (error_ != 0) return FailCall();
  }
  for (;;) {
    if (!PrepareToSleep()) return error_ != 0 ? FailCall() : 0;
    int timeout_ms = -1;
    if (deadline_ns >= 0) {
      int64_t left = deadline_ns - MonotonicNs();
      if (left <= 0) {
        errno = EAGAIN;
        return -1;
      }
      timeout_ms = static_cast<int>(std::min<int64_t>(
          (left + 999'999) / 1'000'000, 1'000'000));
    }
    struct pollfd fds[2] = {{cc_->fd, POLLIN, 0}, {ec_->fd, POLLIN, 0}};
    int rc = sys::poll(fds, 2, timeout_ms);
    if (rc < 0 && errno != EINTR) return -1;
    if (fds[0].revents & POLLIN) {
      struct ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (ibv_get_cq_event(cc_, &ev_cq, &ev_ctx) == 0) {
        ibv_ack_cq_events(ev_cq, 1);
        cq_armed_ = false;
      }
    }
    if (fds[1].revents & POLLIN) HandleCmEvents();
    if (error_ != 0) return FailCall();
    if (Progress() > 0) return 0;
    if (error_ != 0) return FailCall();
    if (rc < 0) return 0;  // EINTR: let the caller re-check its condition
  }
}

int RdmaChannel::ReserveSendSlots(uint32_t wrs, int64_t deadline_ns) {
  if (link_) return 0;  // the link reserves room on its QP
  while (sq_inflight_ + wrs > opt_.send_queue_depth) {
    if (WaitForProgress(deadline_ns) != 0) return -1;
  }
  return 0;
}

int RdmaChannel::PostImmOnly(uint32_t imm, bool force_signal,
                             int64_t deadline_ns) {
  // FIN, CLOSE and markers follow the data: post corked and held bytes
  // first.  (Credits are about the other direction and may pass them.)
  if ((imm & kImmTypeMask) == kImmControl && ReleaseHeld(deadline_ns) != 0)
    return -1;
  if (ReserveSendSlots(1, deadline_ns) != 0) return -1;
  if (link_) {
    // A credit may exceed one immediate's count: split it.
    uint32_t type = imm & kImmTypeMask;
    uint32_t value = imm & kImmValueMask;
    do {
      uint32_t v = type == kImmControl ? value : std::min(value, link::kMaxImmCount);
      value -= v;
      ++unsignalled_;
      bool signal = value == 0 && (force_signal || unsignalled_ >= opt_.signal_every);
      if (signal) {
        unsignalled_ = 0;
        ++sig_posted_;
      }
      if (link_->PostToPeer(link_conn_, nullptr, 0, 0, 0, type, v, signal) != 0) {
        SetReset(ECONNRESET);
        errno = ECONNRESET;
        return -1;
      }
    } while (value > 0);
    return 0;
  }
  struct ibv_send_wr wr = {};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(imm);
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  wr.wr.rdma.remote_addr = peer_ring_addr_;
  wr.wr.rdma.rkey = peer_rkey_;
  ++unsignalled_;
  if (force_signal || unsignalled_ >= opt_.signal_every) {
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr_id = unsignalled_;
    unsignalled_ = 0;
    ++sig_posted_;
  }
  struct ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, &wr, &bad);
  if (rc != 0) {
    VSOCKET_LOG(kInfo, "rdma: ibv_post_send: %s", strerror(rc));
    SetReset(ECONNRESET);
    errno = ECONNRESET;
    return -1;
  }
  ++sq_inflight_;
  return 0;
}

int RdmaChannel::PostStreamOnLink(const uint8_t* src, uint32_t lkey,
                                  bool src_is_mirror, uint64_t index,
                                  uint64_t len, bool signal) {
  uint64_t mask = tx_cap_ - 1;
  // The mirror wraps with the ring: its base is `src` less the offset.
  const uint8_t* mirror = src_is_mirror ? src - (index & mask) : nullptr;
  for (uint64_t done = 0; done < len;) {
    uint64_t n = std::min<uint64_t>(len - done, link::kMaxImmCount);
    uint64_t pos = (index + done) & mask;
    uint64_t first = std::min(n, tx_cap_ - pos);
    const uint8_t* p0 = src_is_mirror ? mirror + pos : src + done;
    const uint8_t* p1 = src_is_mirror ? mirror : src + done + first;
    ibv_sge sges[2] = {
        {reinterpret_cast<uintptr_t>(p0), static_cast<uint32_t>(first), lkey},
        {reinterpret_cast<uintptr_t>(p1), static_cast<uint32_t>(n - first), lkey}};
    uint64_t offsets[2] = {pos, 0};
    int pieces = first < n ? 2 : 1;
    unsignalled_ += static_cast<uint32_t>(pieces);
    bool last = done + n == len;
    bool sig = last && (signal || unsignalled_ >= opt_.signal_every);
    if (sig) {
      unsignalled_ = 0;
      ++sig_posted_;
    }
    if (link_->PostToPeer(link_conn_, sges, offsets, pieces, kImmData,
                          static_cast<uint32_t>(n), sig) != 0) {
      SetReset(ECONNRESET);
      errno = ECONNRESET;
      return -1;
    }
    done += n;
  }
  return 0;
}

int RdmaChannel::PostStreamWrite(const uint8_t* src, uint32_t lkey,
                                 bool src_is_mirror, uint64_t index,
                                 uint64_t len, bool force_signal,
                                 int64_t deadline_ns) {
  if (link_) {
    return PostStreamOnLink(src, lkey, src_is_mirror, index, len, force_signal);
  }
  uint64_t mask = tx_cap_ - 1;
  uint64_t pos = index & mask;
  uint64_t first = std::min(len, tx_cap_ - pos);
  uint32_t nwr = first < len ? 2 : 1;
  if (ReserveSendSlots(nwr, deadline_ns) != 0) return -1;

  struct ibv_sge sge[2];
  struct ibv_send_wr wr[2] = {};
  const uint8_t* src2 = src_is_mirror ? src - pos : src + first;
  uint64_t piece_len[2] = {first, len - first};
  uint64_t piece_dst[2] = {pos, 0};
  const uint8_t* piece_src[2] = {src, src2};
  for (uint32_t i = 0; i < nwr; ++i) {
    sge[i].addr = reinterpret_cast<uintptr_t>(piece_src[i]);
    sge[i].length = static_cast<uint32_t>(piece_len[i]);
    sge[i].lkey = lkey;
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].wr.rdma.remote_addr = peer_ring_addr_ + piece_dst[i];
    wr[i].wr.rdma.rkey = peer_rkey_;
    if (piece_len[i] <= max_inline_) wr[i].send_flags |= IBV_SEND_INLINE;
    wr[i].next = (i + 1 < nwr) ? &wr[i + 1] : nullptr;
    ++unsignalled_;
  }
  struct ibv_send_wr& last = wr[nwr - 1];
  last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  last.imm_data = htonl(kImmData | static_cast<uint32_t>(len));
  if (force_signal || unsignalled_ >= opt_.signal_every) {
    last.send_flags |= IBV_SEND_SIGNALED;
    last.wr_id = unsignalled_;
    unsignalled_ = 0;
    ++sig_posted_;
  }
  struct ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, wr, &bad);
  if (rc != 0) {
    VSOCKET_LOG(kInfo, "rdma: ibv_post_send: %s", strerror(rc));
    SetReset(ECONNRESET);
    errno = ECONNRESET;
    return -1;
  }
  sq_inflight_ += nwr;
  return 0;
}

ssize_t RdmaChannel::Send(const struct iovec* iov, int iovcnt,
                          const WaitOptions& wait, bool more) {
  if (closed_ || error_ != 0) return FailCall();
  if (fin_sent_) {
    errno = EPIPE;
    return -1;
  }
  uint64_t want = IovTotal(iov, iovcnt);
  if (want == 0) return 0;
  BeginCall(wait);
  int64_t deadline = DeadlineAfter(wait.timeout_ns);
  uint64_t done = 0;
  const bool hold = more || cork_;  // see "Held sends"
  Progress();
  // The next Send() may cork behind this one (see "Corking").
  struct MarkSend {
    bool* flag;
    ~MarkSend() { *flag = true; }
  } mark{&last_call_was_send_};
  while (done < want) {
    if (error_ != 0) break;
    if (peer_closed_) {
      if (done > 0) break;
      return SendToClosedPeer(want);
    }
    int64_t n = producer_->Write(iov, iovcnt, done);
    if (n == fifo::kCorrupt) {
      SetReset(ECONNRESET);
      break;
    }
    if (n == fifo::kUserFault) {  // a bad pointer: what came before is sent
      if (done > 0) break;
      errno = EFAULT;
      return -1;
    }
    if (n > 0) {
      // The bytes are in the mirror: accepted.  From here they are either
      // held, or corked (a completion in flight will post them), or posted
      // now.
      done += static_cast<uint64_t>(n);
      if (hold) [[unlikely]] {
        if (!held()) hold_since_ns_ = MonotonicNs();
        // Full, or the ring is: the peer can only make room for what it got.
        if (held_bytes() < opt_.hold_max && producer_->FreeSpace() > 0) continue;
      }
      if (held()) [[unlikely]] {
        hold_since_ns_ = 0;  // posted now, never left to the autocork
      } else if (MayCork()) {
        ++corked_sends_;
        continue;
      }
      if (FlushCorked(deadline) != 0) {
        if (error_ != 0) break;
        // The send queue stayed full past the deadline: the bytes wait
        // corked behind the WRs in flight, whose completions post them.
        return static_cast<ssize_t>(done);
      }
      continue;
    }
    // Ring full: wait for a credit (WaitForProgress posts what is corked
    // first, and a hold ends: the peer can only credit what it received).
    hold_since_ns_ = 0;
    if (WaitForProgress(deadline) != 0) {
      if (done > 0 && errno == EAGAIN) return static_cast<ssize_t>(done);
      if (done > 0 && error_ == 0) return static_cast<ssize_t>(done);
      return -1;
    }
  }
  if (done == 0 && error_ != 0) return FailCall();
  return static_cast<ssize_t>(done);
}

void RdmaChannel::SetCork(bool on) {
  cork_ = on;
  if (!on) PushHeld();
}

void RdmaChannel::PushHeld() {
  if (!held()) return;
  // EAGAIN (send queue full): corked behind the WRs in flight, whose
  // completions post them (Progress); a reset fails the next call.
  ReleaseHeld(kNoSlotWait);
}

int64_t RdmaChannel::ReleaseHeldIfDue(int64_t now_ns) {
  if (!held()) return 0;
  int64_t due = hold_deadline_ns();
  if (now_ns < due && !closed_ && error_ == 0) return due;
  PushHeld();
  return 0;
}

int RdmaChannel::FlushCorked(int64_t deadline_ns) {
  uint64_t pending = corked_bytes();  // 0 while held
  if (pending == 0 || flushing_) return 0;
  if (closed_ || error_ != 0) return FailCall();
  if (deadline_ns == kNoSlotWait) {
    if (sq_inflight_ + 2 > opt_.send_queue_depth) {
      errno = EAGAIN;
      return -1;
    }
    deadline_ns = 0;  // room is there: PostStreamWrite does not wait
  }
  flushing_ = true;
  uint64_t start = tx_posted_;
  int rc = PostStreamWrite(tx_block_.addr + (start & (tx_cap_ - 1)),
                           tx_block_.lkey, /*src_is_mirror=*/true, start,
                           pending, /*force_signal=*/true, deadline_ns);
  flushing_ = false;
  if (rc != 0) {
    if (errno != EAGAIN) {
      // Bytes accepted by Send() could not be posted: the stream is broken.
      SetReset(ECONNRESET);
      errno = ECONNRESET;
    }
    return -1;
  }
  tx_posted_ += pending;
  ++cork_flushes_;
  return 0;
}

std::unique_ptr<UserRegion> UserRegion::Register(MemoryPool* pool,
                                                 const void* data, size_t len) {
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pool->pd(), const_cast<void*>(data), len, 0);
  if (mr == nullptr) {
    if (errno == 0) errno = ENOMEM;
    return nullptr;
  }
  return std::unique_ptr<UserRegion>(
      new UserRegion(mr, static_cast<const uint8_t*>(data), len));
}

std::unique_ptr<UserRegion> RdmaChannel::RegisterUserBuffer(const void* data,
                                                            size_t len) {
  if (closed_ || pool_ == nullptr) {
    errno = ENOTCONN;
    return nullptr;
  }
  std::unique_ptr<UserRegion> region = UserRegion::Register(pool_, data, len);
  if (region) user_registered_ += len;
  return region;
}

ssize_t RdmaChannel::SendRegisteredAsync(const UserRegion& region,
                                         size_t offset, size_t len,
                                         const WaitOptions& wait,
                                         uint64_t* ticket) {
  *ticket = sig_done_;  // nothing to wait for unless bytes get posted
  if (closed_ || error_ != 0) return FailCall();
  if (fin_sent_) {
    errno = EPIPE;
    return -1;
  }
  if (offset > region.size() || len > region.size() - offset ||
      region.mr_->pd != pool_->pd()) {
    errno = EINVAL;
    return -1;
  }
  if (len == 0) return 0;
  BeginCall(wait);
  int64_t deadline = DeadlineAfter(wait.timeout_ns);
  uint64_t done = 0;
  bool timed_out = false;
  Progress();
  if (peer_closed_) return SendToClosedPeer(len);
  // The stream's order: corked and held mirror bytes precede these.
  if (ReleaseHeld(deadline) != 0) return error_ != 0 ? FailCall() : -1;
  while (done < len && error_ == 0 && !peer_closed_) {
    int64_t space = producer_->FreeSpace();
    if (space == fifo::kCorrupt) {
      SetReset(ECONNRESET);
      break;
    }
    if (space == 0) {  // ring full: wait for a credit
      if (WaitForProgress(deadline) != 0) {
        timed_out = (errno == EAGAIN);
        break;
      }
      continue;
    }
    // Reserve first, so a full send queue is a timeout, not a broken stream.
    if (ReserveSendSlots(2, deadline) != 0) {
      timed_out = (errno == EAGAIN);
      break;
    }
    uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(space), len - done);
    uint64_t start = tx_head_;
    bool last = (done + n == len);
    if (PostStreamWrite(region.data() + offset + done, region.mr_->lkey,
                        /*src_is_mirror=*/false, start, n, last,
                        deadline) != 0) {
      SetReset(ECONNRESET);
      break;
    }
    // Advance the producer's index without a copy (the bytes went straight
    // from user memory).
    tx_head_ += n;
    tx_posted_ = tx_head_;
    tx_ctl_.head.store(tx_head_, std::memory_order_release);
    done += n;
  }
  if (done > 0 && error_ == 0 && unsignalled_ > 0) {
    // Stopped early after an unsignalled WR: signal a marker behind it so
    // the ticket has a completion (the send queue completes in order).
    PostImmOnly(kImmControl | kCtlNop, true,
                MonotonicNs() + opt_.close_timeout_ns);
  }
  *ticket = sig_posted_;
  if (error_ != 0) return FailCall();
  if (done == 0 && timed_out) {
    errno = EAGAIN;
    return -1;
  }
  if (done == 0 && peer_closed_) return SendToClosedPeer(len);
  return static_cast<ssize_t>(done);
}

ssize_t RdmaChannel::SendToClosedPeer(uint64_t len) {
  // As kernel TCP: the peer's close looks like its FIN until the peer's
  // kernel answers our next data with an RST, so that one send succeeds
  // (the bytes are dropped: nobody will read them) and later ones fail
  // with EPIPE.
  if (sent_to_closed_peer_) {
    errno = EPIPE;
    return -1;
  }
  sent_to_closed_peer_ = true;
  return static_cast<ssize_t>(len);
}

bool RdmaChannel::ZeroCopyCompleted(uint64_t ticket) {
  if (!closed_) Progress();
  return sig_done_ >= ticket;
}

int RdmaChannel::WaitZeroCopy(uint64_t ticket, const WaitOptions& wait) {
  if (closed_) return FailCall();
  BeginCall(wait);
  int64_t deadline = DeadlineAfter(wait.timeout_ns);
  while (!ZeroCopyCompleted(ticket)) {
    if (error_ != 0) return FailCall();
    if (WaitForProgress(deadline) != 0) return -1;
  }
  return 0;
}

ssize_t RdmaChannel::SendRegistered(const UserRegion& region, size_t offset,
                                    size_t len, const WaitOptions& wait) {
  uint64_t ticket = 0;
  ssize_t n = SendRegisteredAsync(region, offset, len, wait, &ticket);
  if (n <= 0) return n;
  // The user may reuse the buffer once the NIC read it.  If the caller's
  // deadline is already gone, give the completion close_timeout_ns more.
  WaitOptions w = wait;
  if (w.timeout_ns >= 0) w.timeout_ns = std::max(w.timeout_ns, opt_.close_timeout_ns);
  if (WaitZeroCopy(ticket, w) != 0) return -1;
  return n;
}

void RdmaChannel::MaybeSendCredit(bool force) {
  uint64_t owed = rx_tail_ - rx_credited_;
  // After the peer's FIN (or CLOSE) no byte comes that a credit could make
  // room for.  Over a link the peer's process may be gone by then, its
  // link with it: a credit posted there failed and reset a connection that
  // had ended cleanly (its buffered bytes and EOF lost: preload_apps.sh's
  // python echo, 3 runs in 8).
  if (owed == 0 || error_ != 0 || !connected_ || peer_fin_) return;
  if (!force && owed < rx_cap_ / 4) return;
  // Non-blocking: if the send queue is full the credit goes out next time.
  if (sq_inflight_ + 1 > opt_.send_queue_depth) return;
  if (PostImmOnly(kImmCredit | static_cast<uint32_t>(owed), false, 0) == 0) {
    rx_credited_ = rx_tail_;
  }
}

ssize_t RdmaChannel::Recv(const struct iovec* iov, int iovcnt,
                          const WaitOptions& wait) {
  if (closed_) return FailCall();
  last_call_was_send_ = false;
  if (IovTotal(iov, iovcnt) == 0) return 0;
  BeginCall(wait);
  int64_t deadline = DeadlineAfter(wait.timeout_ns);
  for (;;) {
    Progress();
    if (ResetAndDrained()) return FailCall();
    int64_t n = consumer_->Read(iov, iovcnt, 0, /*peek=*/false);
    if (n == fifo::kCorrupt) {
      SetReset(ECONNRESET);
      return FailCall();
    }
    if (n == fifo::kUserFault) {  // a bad pointer: nothing was consumed
      errno = EFAULT;
      return -1;
    }
    if (n > 0) {
      MaybeSendCredit(false);
      return static_cast<ssize_t>(n);
    }
    if (error_ != 0) return FailCall();
    if (peer_fin_) return 0;
    // Nothing to read: a credit that found the send queue full earlier must
    // still go out, or a producer blocked on a full ring would wait forever.
    MaybeSendCredit(false);
    if (WaitForProgress(deadline) != 0) return -1;
  }
}

ssize_t RdmaChannel::TryRecv(const struct iovec* iov, int iovcnt, bool peek) {
  if (closed_) return FailCall();
  last_call_was_send_ = false;
  Progress();
  if (ResetAndDrained()) return FailCall();
  int64_t n = consumer_->Read(iov, iovcnt, 0, peek);
  if (n == fifo::kCorrupt) {
    SetReset(ECONNRESET);
    return FailCall();
  }
  if (n == fifo::kUserFault) {  // a bad pointer: nothing was consumed
    errno = EFAULT;
    return -1;
  }
  if (n > 0) {
    if (!peek) MaybeSendCredit(false);
    return static_cast<ssize_t>(n);
  }
  if (error_ != 0) return FailCall();
  if (peer_fin_) return 0;
  MaybeSendCredit(false);  // see Recv(): a credit may be owed
  FlushCorked(kNoSlotWait);  // the caller waits next: nothing stays corked
  errno = EAGAIN;
  return -1;
}

ssize_t RdmaChannel::TryPeekContiguous(const uint8_t** data) {
  if (closed_) return FailCall();
  last_call_was_send_ = false;
  Progress();
  if (ResetAndDrained()) return FailCall();
  int64_t n = consumer_->Contiguous(data);
  if (n == fifo::kCorrupt) {
    SetReset(ECONNRESET);
    return FailCall();
  }
  if (n > 0) return static_cast<ssize_t>(n);
  if (error_ != 0) return FailCall();
  if (peer_fin_) return 0;
  MaybeSendCredit(false);  // see Recv(): a credit may be owed
  errno = EAGAIN;
  return -1;
}

void RdmaChannel::Consume(uint64_t n) {
  if (closed_ || n == 0) return;
  consumer_->Discard(n);
  MaybeSendCredit(false);
}

int RdmaChannel::PollNow() {
  if (closed_) return 0;
  last_call_was_send_ = false;
  FlushCorked(kNoSlotWait);
  return Progress();
}

void RdmaChannel::PollCm() {
  if (closed_) return;
  HandleCmEvents();
}

void RdmaChannel::ArmForEvents() {
  if (closed_) return;
  for (int i = 0; i < 64 && !closed_ && error_ == 0; ++i) {
    if (PrepareToSleep()) break;
    MaybeSendCredit(false);
  }
}

void RdmaChannel::ConsumeEvents() {
  if (closed_) return;
  if (link_) {
    Progress();
    return;
  }
  struct ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  while (cq_armed_ && ibv_get_cq_event(cc_, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    cq_armed_ = false;
  }
  Progress();
}

uint64_t RdmaChannel::SendSpace() const {
  if (closed_ || error_ != 0 || !producer_) return 0;
  if (sq_inflight_ + 2 > opt_.send_queue_depth) return 0;
  int64_t space = producer_->FreeSpace();
  return space > 0 ? static_cast<uint64_t>(space) : 0;
}

int64_t RdmaChannel::ReadableBytes() {
  if (closed_) return FailCall();
  last_call_was_send_ = false;
  Progress();
  HandleCmEvents();
  if (error_ != 0) return FailCall();
  int64_t n = consumer_->AvailableNow();
  if (n == fifo::kCorrupt) {
    SetReset(ECONNRESET);
    return FailCall();
  }
  return n;
}

int RdmaChannel::ShutdownWrite() {
  if (closed_ || error_ != 0) return FailCall();
  call_spin_ns_ = opt_.spin_ns;
  if (fin_sent_) return 0;
  if (PostImmOnly(kImmControl | kCtlFin, true,
                  DeadlineAfter(opt_.close_timeout_ns)) != 0) {
    return -1;
  }
  fin_sent_ = true;
  return 0;
}

void RdmaChannel::Abort() {
  if (closed_) return;
  SetReset(ECONNRESET);  // Close() then skips CLOSE and disconnects
  Close();
}

namespace {

// Destroys *p with `destroy` unless it is null, and forgets it.
template <typename T, typename R>
void DestroyOnce(T*& p, R (*destroy)(T*)) {
  if (p == nullptr) return;
  destroy(p);
  p = nullptr;
}

}  // namespace

void RdmaChannel::Close() {
  if (closed_) return;
  int64_t drain_deadline = MonotonicNs() + opt_.close_drain_timeout_ns;
  call_spin_ns_ = opt_.spin_ns;
  if (link_) {
    CloseOnLink(drain_deadline);
    return;
  }
  if (ec_ != nullptr && connected_) HandleCmEvents();
  if (qp_ != nullptr && connected_ && error_ == 0 && !peer_closed_) {
    // Tell the peer, then wait until our writes (and the CLOSE) completed so
    // the disconnect cannot flush data the peer has not received.  (A
    // 500 ms bound here lost the tail of a 32 MiB transfer between two slow
    // guests: the peer saw a reset after most of the data.)
    if (PostImmOnly(kImmControl | kCtlClose, true, drain_deadline) == 0) {
      fin_sent_ = true;
      uint64_t target = sig_posted_;
      while (error_ == 0 && sig_done_ < target) {
        if (WaitForProgress(drain_deadline) != 0) break;
      }
      if (error_ == 0 && sig_done_ < target) {
        VSOCKET_LOG(kWarn, "rdma: close gave up after %lld ms with data in flight",
                    static_cast<long long>(opt_.close_drain_timeout_ns / 1000000));
      }
    }
  }
  int64_t deadline = MonotonicNs() + opt_.close_timeout_ns;
  if (id_ != nullptr && !disconnecting_ && (connected_ || error_ != 0)) {
    disconnecting_ = true;
    bool disconnect_sent = rdma_disconnect(id_) == 0;
    // Wait (bounded) for DISCONNECTED so the CM exchange finishes cleanly.
    while (disconnect_sent && connected_) {
      int64_t left = deadline - MonotonicNs();
      if (left <= 0) break;
      struct pollfd pfd = {ec_->fd, POLLIN, 0};
      if (sys::poll(&pfd, 1, static_cast<int>(left / 1'000'000) + 1) <= 0) break;
      HandleCmEvents();
    }
  }
  connected_ = false;
  closed_ = true;
  // Drain events so destroy calls do not wait for unacknowledged ones.
  if (ec_ != nullptr) {
    struct rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(ec_, &ev) == 0) rdma_ack_cm_event(ev);
  }
  // In this order: the QP before its CQ and the id, the CQ before its
  // channel, the id before its event channel.
  if (qp_ != nullptr) {
    rdma_destroy_qp(id_);
    qp_ = nullptr;
  }
  DestroyOnce(cq_, ibv_destroy_cq);
  DestroyOnce(cc_, ibv_destroy_comp_channel);
  DestroyOnce(id_, rdma_destroy_id);
  DestroyOnce(ec_, rdma_destroy_event_channel);
  if (pool_ != nullptr) {
    pool_->Free(rx_block_);
    pool_->Free(tx_block_);
    rx_block_ = {};
    tx_block_ = {};
  }
  consumer_.reset();
  producer_.reset();
}

void RdmaChannel::CloseOnLink(int64_t drain_deadline) {
  if (connected_ && error_ == 0 && !peer_closed_) {
    // Stream order: what is held or corked leaves first; then a signalled
    // marker, and the wait for it, so that everything sent reached the
    // peer before the slot's last message (and before the link could be
    // torn down with our writes in flight).
    if (PostImmOnly(kImmControl | kCtlNop, true, drain_deadline) == 0) {
      uint64_t target = sig_posted_;
      while (error_ == 0 && sig_done_ < target) {
        if (WaitForProgress(drain_deadline) != 0) break;
      }
    }
  }
  // The last message for the slot: CLOSE, or RESET after a reset or an
  // Abort() (the peer then reports ECONNRESET, as after TCP's RST).  It
  // must leave before we return: a process that exits next takes its QPs
  // down, and a CLOSE still in the send queue would reach the peer as the
  // link's disconnect -- a reset of a connection closed cleanly
  // (kill_loop_test: a victim's EOF read as ECONNRESET).
  const uint32_t generation = link_->CloseConnection(link_conn_, /*reset=*/error_ != 0);
  while (!link_->LastMessageDone(link_conn_, generation) &&
         MonotonicNs() < drain_deadline) {
    link_->Wait(drain_deadline);
    link_->SignalTouched(link_conn_.slot);  // what the wait filed for others
  }
  connected_ = false;
  closed_ = true;
  fin_sent_ = true;
  consumer_.reset();
  producer_.reset();
  rx_block_ = {};
  tx_block_ = {};
  link_.reset();
}

}  // namespace vsocket::rdma
