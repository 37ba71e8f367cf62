// RdmaChannel: a reliable, ordered byte stream between two processes over one
// RC queue pair, set up with librdmacm (see rdma_cm_connection.h for
// RdmaListener / RdmaConnect, which create channels).
//
// Data path.  Each side owns a RECEIVE ring (fifo_bridge/ring_layout.h)
// whose data area alone has its own memory region (the control block with
// head, tail and flags is in ordinary memory: the peer cannot write it) (memory_pool.h: LOCAL_WRITE | REMOTE_WRITE,
// never REMOTE_READ).  The sender keeps a private MIRROR of the peer's ring
// (same capacity, carved from the bounce arena, local access only):
// RingProducer copies user bytes into the mirror at the same offsets they
// will occupy in the peer's ring (the one copy), and the channel posts
// IBV_WR_RDMA_WRITE_WITH_IMM from the mirror to the peer's ring (a plain
// RDMA WRITE first when the range wraps), immediate = byte count, inline
// when it fits the QP's max_inline_data.  Only every `signal_every`-th send is
// signalled.  The receiver advances its head from the immediate (validated
// against free space), RingConsumer copies out, and once a quarter of the
// ring was consumed it returns a credit (a zero-length WRITE WITH IMM whose
// immediate is the consumed byte count), so the producer never overwrites
// unread data.  SendRegistered() skips the mirror: it writes straight from a
// user buffer registered once with RegisterUserBuffer() (zero copy).
// Every receive WR consumed by an immediate is re-posted.
//
// Corking (autocork).  A Send() that directly follows another Send() (no
// other call on the channel between them), or that is made while an earlier
// signalled WRITE is still in flight, and that leaves fewer than
// ChannelOptions::cork_max bytes waiting, copies into the mirror and posts
// nothing: a burst of small sends leaves as one WRITE (on Soft-RoCE each
// post is a system call through the whole emulated NIC), as kernel TCP's
// autocork holds small writes while earlier ones sit in the device queue.
// The waiting bytes are posted (always signalled, so corking can go on
// behind them) by the first of: cork_max reached, a Send() that may not
// cork, the in-flight completion being seen (Progress()) unless the last
// call was a Send(), a ring-full or send-queue wait, PollNow() or
// PrepareToSleep() (a caller is about to look or sleep), a receive that
// finds nothing, a zero-copy send, FIN or CLOSE.  A Send() after any other
// call (a request after its answer) is never corked.  A caller that sends
// a burst and then makes no call at all leaves its tail corked: RdmaTransport
// posts it from the progress thread's next check (rdma_transport.cc).
// Off unless ChannelOptions::cork_max is set.
//
// Held sends (TCP_CORK, MSG_MORE).  Apart from the autocork: while the cork
// is in (SetCork(true)), or for a Send() made with `more`, the accepted
// bytes stay in the mirror unposted, with every unposted byte before them,
// as kernel TCP holds a partial segment.  Only these post them: SetCork(
// false), PushHeld() (TCP_NODELAY), a Send() without `more` while uncorked,
// hold_max bytes held, a held Send() that fills the peer's ring (the peer
// can only credit what it got), a zero-copy send (stream order), FIN,
// CLOSE, and ReleaseHeldIfDue() once hold_ns passed since the hold began
// (RdmaTransport calls it from the progress thread).  Released bytes that
// find the send queue full wait behind the WRs in flight, as corked ones.
// The autocork's triggers (Progress(), PollNow(), PrepareToSleep(), a
// receive that finds nothing, a sleeping caller) leave held bytes alone.
// Held bytes are in this process's memory: _exit() or a kill loses them.
//
// Waiting.  Blocking calls spin on the CQ for at most `spin_ns`, then arm the
// CQ and poll() the completion channel fd together with the RDMA CM event fd
// until the caller's deadline.  A CM DISCONNECTED event not preceded by the
// peer's close message, a CQ error (QP in error state, retry exceeded, flush)
// or a corrupt index/immediate from the peer puts the channel in the reset
// state: every later call fails with ECONNRESET.
//
// Over a link (OnLink(); rdma_backend/README.md "Links"): the same data
// path, but the QP, CQ and memory are the link's: writes and immediates go
// through RdmaLink::PostToPeer with this connection's slot in the
// immediate (byte counts above link::kMaxImmCount are split), the link
// files what arrives in the slot's inbox and Progress() applies it with the
// same checks, waits use the link's Wait(), and Close() ends with the
// slot's last message (RdmaLink::CloseConnection) instead of a disconnect.
// completion_fd() and cm_fd() are then the link's, shared by all of its
// connections.
//
// Threading: thread-compatible.  One thread at a time may call into a channel
// (callers serialise: RdmaTransport holds its Core::mu around every call).
// Ownership: the channel owns its cm_id, event channel, completion channel,
// CQ, QP and pool blocks; the process-wide MemoryPool outlives it.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_CHANNEL_H_
#define VSOCKET_RDMA_BACKEND_RDMA_CHANNEL_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/spsc_ring.h"
#include "rdma_backend/memory_pool.h"
#include "rdma_backend/rdma_link.h"
#include "rdma_backend/wire_format.h"

namespace vsocket::rdma {

struct ChannelOptions {
  uint64_t ring_capacity = 1u << 20;       // our receive ring, power of two
  uint32_t spin_ns = 20'000;               // CQ busy-poll before sleeping
  int64_t connect_timeout_ns = 5'000'000'000;
  int64_t close_timeout_ns = 500'000'000;  // disconnect handshake
  // How long Close() waits for the NIC to deliver what was already sent
  // (the data is in flight, not waiting for the peer application: RDMA
  // WRITEs land without it).  A live peer thus gets every byte even when a
  // slow link needs seconds; a dead one ends the wait sooner, through the
  // QP's retry exhaustion (error).
  int64_t close_drain_timeout_ns = 10'000'000'000;
  uint32_t signal_every = 16;              // signalled send WR period
  // Send corking (see "Corking" above): the most bytes a burst of small
  // Send()s holds unposted.  0 (the default) = post every Send() at once.
  // RdmaTransport sets VSOCKET_RDMA_CORK and bounds how long a tail stays
  // corked; a bare channel's owner that sets it must make a call (any, or
  // PrepareToSleep) after its last Send() of a burst.
  uint32_t cork_max = 0;
  // Held sends (see "Held sends" above): the most bytes held, and how long
  // a hold lasts at most (kernel TCP on loopback: ~200 ms).
  uint32_t hold_max = 64 * 1024;
  int64_t hold_ns = 200'000'000;
  uint32_t inline_wanted = 128;            // requested max_inline_data
  uint32_t send_queue_depth = 256;
  uint32_t recv_queue_depth = 256;
  uint8_t ack_timeout = 14;  // 4.096us * 2^14 = 67 ms per transport retry
  // Client: announced in the hello as the paired kernel TCP port (vsocket
  // negotiation); 0 for a bare channel.
  uint16_t hello_tcp_port = 0;
};

// Per-call blocking: timeout_ns 0 = non-blocking (EAGAIN), -1 = no deadline.
// spin_ns: CQ busy-poll budget before sleeping (the socket's busy-poll
// setting); kDefaultSpin = ChannelOptions::spin_ns.
struct WaitOptions {
  static constexpr int64_t kDefaultSpin = -1;
  int64_t timeout_ns = -1;
  int64_t spin_ns = kDefaultSpin;
};

// A user buffer registered for zero-copy sends (local access only).
// Owned by the caller.  Made by a channel's RegisterUserBuffer() (destroy it
// before that channel), or by Register() against a device's pool, which
// lives for the process: then any channel of that device may send from it.
class UserRegion {
 public:
  // Registers [data, data + len) with `pool`'s protection domain (IBV
  // access 0: local read only; peers can never reach it).  nullptr with
  // errno (ENOMEM: e.g. RLIMIT_MEMLOCK) on failure.
  static std::unique_ptr<UserRegion> Register(MemoryPool* pool,
                                              const void* data, size_t len);
  ~UserRegion();
  UserRegion(const UserRegion&) = delete;
  UserRegion& operator=(const UserRegion&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class RdmaChannel;
  UserRegion(ibv_mr* mr, const uint8_t* data, size_t size)
      : mr_(mr), data_(data), size_(size) {}
  ibv_mr* mr_;
  const uint8_t* data_;
  size_t size_;
};

class RdmaChannel {
 public:
  // A channel for the paired connection `conn` of `link` (Open() or
  // AcceptOpen() made it).  `pool`: the device's pool (zero copy).
  // REQUIRES: `conn` is open on `link` and used by nothing else.
  static std::unique_ptr<RdmaChannel> OnLink(std::shared_ptr<RdmaLink> link,
                                             const LinkConnection& conn,
                                             MemoryPool* pool,
                                             const ChannelOptions& options);
  ~RdmaChannel();  // Close()
  RdmaChannel(const RdmaChannel&) = delete;
  RdmaChannel& operator=(const RdmaChannel&) = delete;

  // Sends all `iov` bytes unless the deadline passes first (then returns the
  // bytes sent so far, or -1/EAGAIN if none).  -1 with errno ECONNRESET
  // (reset), EPIPE (we shut down writing, or the peer closed).  `more`
  // (MSG_MORE): the bytes are held (see "Held sends").
  ssize_t Send(const struct iovec* iov, int iovcnt, const WaitOptions& wait,
               bool more = false);
  ssize_t Send(const void* buf, size_t len, const WaitOptions& wait,
               bool more = false) {
    struct iovec iov = {const_cast<void*>(buf), len};
    return Send(&iov, 1, wait, more);
  }

  // TCP_CORK in or out (see "Held sends"); out posts what is held.
  void SetCork(bool on);
  bool cork() const { return cork_; }
  // Posts what is held now (TCP_NODELAY turned on; the cork stays in).
  // Never waits: with the send queue full the bytes are posted behind the
  // WRs in flight, as corked ones.
  void PushHeld();
  // Posts what is held once hold_ns passed since the hold began (`now_ns`:
  // CLOCK_MONOTONIC).  Returns when the hold is due if it still holds, else
  // 0.
  int64_t ReleaseHeldIfDue(int64_t now_ns);

  // Zero-copy send of region[offset, offset + len): no copy into the
  // mirror.  Returns only after the NIC finished reading the user bytes, so
  // the caller may reuse them at once.  Same results as Send(); EINVAL if
  // the range is outside the region or the region belongs to another
  // device.
  // REQUIRES: `region` was registered with this channel's pool (this
  //           channel's RegisterUserBuffer(), or UserRegion::Register(pool())).
  ssize_t SendRegistered(const UserRegion& region, size_t offset, size_t len,
                         const WaitOptions& wait);

  // Like SendRegistered() but returns once the bytes are posted: they must
  // stay unchanged until ZeroCopyCompleted(*ticket) (or WaitZeroCopy()).
  // After a reset the NIC stops reading them once Close() returned.
  ssize_t SendRegisteredAsync(const UserRegion& region, size_t offset,
                              size_t len, const WaitOptions& wait,
                              uint64_t* ticket);
  // True once every zero-copy send up to `ticket` was read by the NIC.
  bool ZeroCopyCompleted(uint64_t ticket);
  // Waits for ZeroCopyCompleted(ticket): 0, or -1 with EAGAIN/ECONNRESET.
  int WaitZeroCopy(uint64_t ticket, const WaitOptions& wait);

  // Registers [data, data + len) once for SendRegistered (IBV access 0:
  // local read only).  nullptr with errno on failure.
  std::unique_ptr<UserRegion> RegisterUserBuffer(const void* data, size_t len);

  // Reads up to the iovec's total length.  Returns bytes read (> 0), 0 at
  // end of stream (peer shut down writing and everything was read), or -1
  // with EAGAIN (nothing before the deadline) / ECONNRESET.
  ssize_t Recv(const struct iovec* iov, int iovcnt, const WaitOptions& wait);
  ssize_t Recv(void* buf, size_t len, const WaitOptions& wait) {
    struct iovec iov = {buf, len};
    return Recv(&iov, 1, wait);
  }

  // Bytes readable now (processes pending completions first), or -1/errno.
  int64_t ReadableBytes();

  // Half-close: tells the peer no more data follows (its Recv returns 0 after
  // the data).  Later Sends fail with EPIPE.  0 or -1/errno.
  int ShutdownWrite();

  // Orderly close, bounded: tells the peer (close message), waits up to
  // close_drain_timeout_ns for our sends to complete, rdma_disconnect(),
  // waits up to close_timeout_ns for the DISCONNECTED event, destroys
  // QP/CQ/channels/id, returns the blocks.
  // Idempotent.  After it every call fails with ENOTCONN.
  void Close();
  // Like Close() but without the CLOSE message: the peer sees a reset
  // (ECONNRESET), not an end of stream.  For channels that were never
  // paired with their socket, so the peer cannot mistake them for a
  // connection that ended normally.
  void Abort();

  // For external event loops: the completion channel fd (readable when a
  // completion arrived after PrepareToSleep()) and the CM event fd (readable
  // on disconnect).  Both are non-blocking.
  int completion_fd() const;
  int cm_fd() const;
  // Consumes completion events already delivered on completion_fd(), arms
  // the CQ and checks it once more.  Returns false if work is pending (do
  // not sleep, call Recv/Send again); true if poll() on both fds may block.
  // Pattern: Recv(..., {timeout 0}) == EAGAIN -> PrepareToSleep() ->
  // poll(completion_fd(), cm_fd()) -> Recv again.
  bool PrepareToSleep();

  // --- Non-blocking primitives for RdmaTransport (which serialises callers
  // and does its own waiting on a readiness socket).  None of these sleep.

  // Reads (or, with `peek`, copies without consuming) up to the iovec's
  // total length.  > 0 bytes, 0 at end of stream, or -1 with EAGAIN (empty)
  // / ECONNRESET / ENOTCONN.  Returns credits as Recv() does.
  ssize_t TryRecv(const struct iovec* iov, int iovcnt, bool peek);
  // In-place view for zero-copy reads: sets *data to the oldest unread
  // byte of the receive ring (registered memory the NIC wrote) and returns
  // how many readable bytes follow it contiguously (> 0), 0 at end of
  // stream, or -1 with EAGAIN (empty) / ECONNRESET / ENOTCONN.  Consumes
  // nothing and returns no credit, so the peer cannot overwrite the view
  // before Consume().
  ssize_t TryPeekContiguous(const uint8_t** data);
  // Consumes `n` unread bytes without copying them and returns credits as
  // Recv() does.  REQUIRES: n <= BufferedBytes().
  void Consume(uint64_t n);
  // Posts corked bytes (see "Corking"), then handles every completion and
  // CM event available now.  Returns the number handled.
  int PollNow();
  // Consumes completion-channel events, arms the CQ and re-checks it, so
  // that completion_fd() becomes readable for the next completion.  Loops
  // until nothing is pending.  CM events are not looked at (PollCm()).
  void ArmForEvents();
  // Consumes completion-channel events and handles what is pending, WITHOUT
  // arming the CQ again: used while a caller busy-polls the channel, so the
  // progress thread is woken at most once per spin.  A later ArmForEvents()
  // re-arms.
  void ConsumeEvents();
  // Handles the CM events pending on cm_fd() (a disconnect).  One system
  // call: for when cm_fd() polled readable, or before trusting a channel
  // nobody watched.
  void PollCm();
  // True while completion_fd() will fire for the next completion.
  bool cq_armed() const { return cq_armed_; }
  // Over a link: the link and this connection's slot; else nullptr.
  const std::shared_ptr<RdmaLink>& link() const { return link_; }
  uint16_t link_slot() const { return link_conn_.slot; }
  // Bytes a Send() could take now without waiting (0 if the ring is full or
  // the channel cannot send).
  uint64_t SendSpace() const;
  // Bytes buffered for reading now (no event processing).
  uint64_t BufferedBytes() const { return rx_head_ - rx_tail_; }
  // Bytes that ever arrived (changes whenever new bytes land; EPOLLET).
  uint64_t ArrivedBytes() const { return rx_head_; }
  bool peer_finished() const { return peer_fin_; }  // FIN or CLOSE seen
  bool peer_closed() const { return peer_closed_; }  // CLOSE: sends EPIPE
  bool write_shut() const { return fin_sent_; }
  bool closed() const { return closed_; }

  // Pending error (ECONNRESET after a reset), or 0.
  int error() const { return error_; }
  // Bytes accepted by Send() but not yet posted: by the autocork
  // (corked_bytes) or held for TCP_CORK/MSG_MORE (held_bytes); one of them
  // is always 0.
  uint64_t corked_bytes() const { return held() ? 0 : tx_head_ - tx_posted_; }
  uint64_t held_bytes() const { return held() ? tx_head_ - tx_posted_ : 0; }
  // When the current hold is due (CLOCK_MONOTONIC), 0 when none.
  int64_t hold_deadline_ns() const {
    return held() ? hold_since_ns_ + opt_.hold_ns : 0;
  }
  // Send() calls that corked, and WRITEs that posted corked bytes (stats).
  uint64_t corked_sends() const { return corked_sends_; }
  uint64_t cork_flushes() const { return cork_flushes_; }
  // Registered bytes this connection holds: receive ring + mirror + user
  // regions registered through it.
  size_t registered_bytes() const;
  uint32_t max_inline() const { return max_inline_; }
  // The device's pool (process lifetime), for UserRegion::Register().
  MemoryPool* pool() const { return pool_; }
  uint64_t recv_capacity() const { return rx_cap_; }
  uint64_t send_capacity() const { return tx_cap_; }
  // For tests and diagnostics only (e.g. forcing the QP into the error
  // state); the channel keeps ownership.
  ibv_qp* qp_for_testing() const { return qp_; }

 private:
  friend class ChannelBuilder;
  // tests/rdma/rdma_hostile_peer_test.cc: a peer that posts work requests a
  // vsocket channel never would (bad immediates, writes outside the ring).
  friend class RdmaChannelTestPeer;
  RdmaChannel() = default;

  // Processes every available completion and CM event without blocking.
  // Returns the number of events handled.
  int Progress();
  void HandleCompletion(const ibv_wc& wc);
  // The rings' bookkeeping once rx_block_ (receive) or tx_block_ (mirror)
  // is in place: capacity, control block, consumer / producer.
  void InitReceiveRing(uint64_t capacity);
  void InitSendRing(uint64_t peer_ring_addr, uint32_t peer_rkey,
                    uint64_t capacity);
  // Applies one validated-as-to-type immediate from the peer (type, value:
  // wire_format.h), checking counts against the rings; a bad one resets.
  void ApplyImm(uint32_t type, uint32_t value);
  // Link only: Progress()'s work (the link's inbox for this slot).
  int ProgressOnLink();
  // Link only: posts [index, index + len) of the stream from `src` as
  // WRITE WITH IMMs of at most link::kMaxImmCount bytes each.
  int PostStreamOnLink(const uint8_t* src, uint32_t lkey, bool src_is_mirror,
                       uint64_t index, uint64_t len, bool signal);
  // Link only: Close()'s work: drain, then the slot's last message.
  void CloseOnLink(int64_t drain_deadline);
  void HandleCmEvents();
  void BeginCall(const WaitOptions& wait) {
    call_spin_ns_ = wait.spin_ns < 0
        ? opt_.spin_ns
        : static_cast<uint32_t>(std::min<int64_t>(wait.spin_ns, 1'000'000'000));
  }
  // Waits (spin, then sleep) until Progress() handles something or the
  // deadline (absolute CLOCK_MONOTONIC ns, -1 = none) passes.
  // 0 = progress, -1 with errno EAGAIN (deadline) or ECONNRESET.
  int WaitForProgress(int64_t deadline_ns);
  // Posts RDMA WRITE(s) of [index, index + len) of the stream into the
  // peer's ring from `src` (lkey `lkey`; contiguous for `len` bytes unless
  // `src_is_mirror`, where the source wraps with the ring too).  Ends with a
  // WRITE WITH IMM carrying `len`.  0 or -1/errno.
  int PostStreamWrite(const uint8_t* src, uint32_t lkey, bool src_is_mirror,
                      uint64_t index, uint64_t len, bool force_signal,
                      int64_t deadline_ns);
  int PostImmOnly(uint32_t imm, bool force_signal, int64_t deadline_ns);
  // Corking: true when a Send() that leaves `corked_bytes()` waiting may
  // post nothing now (a signalled WR in flight will bring a Progress()).
  bool MayCork() const {
    return opt_.cork_max > 0 && corked_bytes() < opt_.cork_max &&
           (last_call_was_send_ || sig_posted_ > sig_done_);
  }
  // Posts the corked bytes as one signalled WRITE; nothing while they are
  // held.  `deadline_ns` kNoSlotWait: only if the send queue has room now.
  // 0, or -1 with errno EAGAIN (no room before the deadline: the bytes stay
  // corked, and a completion in flight posts them) or ECONNRESET.
  static constexpr int64_t kNoSlotWait = -2;
  int FlushCorked(int64_t deadline_ns);
  // Ends the hold, then FlushCorked(deadline_ns).
  int ReleaseHeld(int64_t deadline_ns) {
    hold_since_ns_ = 0;
    return FlushCorked(deadline_ns);
  }
  bool held() const { return hold_since_ns_ != 0; }
  // A send after the peer's CLOSE: `len` (dropped) the first time, then -1
  // with EPIPE, as kernel TCP.
  ssize_t SendToClosedPeer(uint64_t len);
  // Waits until `wrs` more send WRs fit the send queue.
  int ReserveSendSlots(uint32_t wrs, int64_t deadline_ns);
  int PostRecvs(uint32_t count);
  void MaybeSendCredit(bool force);
  void SetReset(int err);
  int FailCall();  // -1 with errno for a reset/closed channel
  // As TCP after an RST: bytes that arrived before the reset stay readable
  // (their immediates were validated); reads fail once they are gone.
  bool ResetAndDrained() const { return error_ != 0 && BufferedBytes() == 0; }

  // Over a link: the link (shared with its other connections) and this
  // connection's slot, slices and the peer's ring.  Null otherwise.
  std::shared_ptr<RdmaLink> link_;
  LinkConnection link_conn_;
  std::vector<SlotEvent> link_events_;  // scratch for Progress()

  // Verbs / CM objects (owned).
  rdma_event_channel* ec_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_comp_channel* cc_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  MemoryPool* pool_ = nullptr;
  ChannelOptions opt_;
  bool connected_ = false;    // ESTABLISHED seen, no disconnect yet
  bool closed_ = false;
  bool disconnecting_ = false;  // we called rdma_disconnect()
  bool cq_armed_ = false;
  uint32_t call_spin_ns_ = 0;   // spin budget of the current call
  int64_t next_cm_check_ns_ = 0;  // rate limit for CM polls while spinning
  uint32_t max_inline_ = 0;

  // Receive side: our ring's data area (its own MR, the only memory the
  // peer's rkey reaches) and its control block, kept in ordinary memory so
  // that the peer cannot write our head, tail or flags.
  PoolBlock rx_block_;
  std::unique_ptr<fifo::RingControl> rx_ctl_;
  uint64_t rx_cap_ = 0;
  uint64_t rx_head_ = 0;         // authoritative, from validated immediates
  uint64_t rx_tail_ = 0;         // RingConsumer's own index
  uint64_t rx_credited_ = 0;     // tail value last reported to the peer
  uint32_t recvs_to_post_ = 0;   // consumed receive WRs not yet re-posted
  std::optional<fifo::RingConsumer> consumer_;

  // Send side: the mirror of the peer's ring (in the bounce arena).
  PoolBlock tx_block_;
  fifo::RingControl tx_ctl_;     // private: head published, tail = credits
  uint64_t tx_cap_ = 0;
  uint64_t tx_head_ = 0;         // RingProducer's own index
  uint64_t tx_posted_ = 0;       // stream index posted up to (<= tx_head_)
  bool flushing_ = false;        // FlushCorked() running (no re-entry)
  bool last_call_was_send_ = false;  // no other call since the last Send()
  bool cork_ = false;            // TCP_CORK in (SetCork)
  // When the unposted bytes began to be held (CLOCK_MONOTONIC; never 0
  // while holding), 0 while they are not ("Held sends").
  int64_t hold_since_ns_ = 0;
  uint64_t corked_sends_ = 0;
  uint64_t cork_flushes_ = 0;
  uint64_t tx_tail_ = 0;         // credited by the peer (validated)
  uint64_t peer_ring_addr_ = 0;
  uint32_t peer_rkey_ = 0;
  std::optional<fifo::RingProducer> producer_;

  // Send queue accounting.
  uint32_t sq_inflight_ = 0;     // posted WRs not yet known complete
  uint32_t unsignalled_ = 0;     // WRs since the last signalled one
  uint64_t sig_posted_ = 0;      // signalled WRs posted
  uint64_t sig_done_ = 0;        // signalled WRs completed

  size_t user_registered_ = 0;
  bool fin_sent_ = false;        // we sent FIN or CLOSE
  bool peer_fin_ = false;        // peer sent FIN or CLOSE
  bool peer_closed_ = false;     // peer sent CLOSE: our sends get EPIPE
  bool sent_to_closed_peer_ = false;  // the one send TCP accepts after it
  int error_ = 0;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_CHANNEL_H_
