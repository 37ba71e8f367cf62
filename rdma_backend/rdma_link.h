// RdmaLink: one RDMA association between a client process and a server
// process's RDMA listener, carrying many connections (rdma_backend/README.md
// "Links"; wire: docs/PROTOCOL.md 6.5, link_wire.h).
//
// A link owns: its CM event channel and ids (one per QP), 1..4 RC QPs, one
// CQ and completion channel for all of them, two LinkSlabs (receive slices:
// remote write; mirrors and control buffers: local only), the slot table
// and, per slot, the inbox of immediates that arrived for it.  Opening a
// connection on a live link costs one OPEN and one ACCEPT (SENDs on the
// link): no CM id, no QP, no ibv_reg_mr unless a slab chunk is added.
//
// Demultiplexing: whoever calls Poll() (or Wait()) drains the CQ under the
// link's mutex and files each immediate in its slot's inbox after checking
// type and slot; counts against a ring are the connection's check
// (TakeEvents).  Anything that cannot be attributed to an open slot kills
// the link: every connection of it gets a RESET event; other links are
// untouched.  A CQ error or a DISCONNECTED while connections are open does
// the same.
//
// LinkListener (server): the CM listener that turns link hellos into
// server-side links.  OPENs that arrive on a server link are queued
// (NextOpen) for the owner to answer with AcceptOpen or DeclineOpen.
//
// Threading: RdmaLink is thread-safe (one mutex, mu_); no call sleeps
// holding it, except that a post spins for send-queue room, which the NIC
// frees without the peer's application.  Lock order: a connection's own
// lock -> mu_.  LinkListener is used by one thread at a time.
// Ownership: shared_ptr (the registry and every connection of the link);
// the destructor disconnects and destroys QPs before the slabs.
// Fork: a child must not use its parent's links (the caller checks).
#ifndef VSOCKET_RDMA_BACKEND_RDMA_LINK_H_
#define VSOCKET_RDMA_BACKEND_RDMA_LINK_H_

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rdma_backend/link_slab.h"
#include "rdma_backend/link_wire.h"

namespace vsocket::rdma {

class MemoryPool;

struct LinkOptions {
  uint8_t qps = 1;  // VSOCKET_RDMA_QPS_PER_LINK, 1..link::kMaxQpsPerLink
  uint16_t slots = link::kMaxSlots;  // offered to the peer
  uint32_t send_queue_depth = 512;   // per QP
  uint32_t recv_queue_depth = 1024;  // per QP
  uint32_t signal_every = 16;        // per QP, whatever the connection
  uint32_t inline_wanted = 128;
  uint8_t ack_timeout = 14;
  int64_t connect_timeout_ns = 5'000'000'000;
  size_t chunk_bytes = 4u << 20;     // slab chunk
  size_t limit_bytes = 256u << 20;   // per slab
};

// One connection's end of a link once paired (ACCEPT sent or received).
struct LinkConnection {
  uint16_t slot = link::kNoSlot;       // ours: the peer's immediates name it
  uint16_t peer_slot = link::kNoSlot;  // the peer's: our immediates name it
  uint16_t tcp_port = 0;               // the client's, from OPEN
  LinkSlice rx;                        // our receive ring's data area
  LinkSlice tx;                        // our mirror of the peer's ring
  uint64_t peer_ring_addr = 0;
  uint32_t peer_rkey = 0;
  uint32_t peer_capacity = 0;
};

// An immediate that arrived for a slot: type is link-checked; the value
// (a count, or a CONTROL value) is for the connection to validate.  Or,
// with type kSlotSendDone (never on the wire), `value` signalled posts of
// this slot completed.
inline constexpr uint32_t kSlotSendDone = 3u << 30;
struct SlotEvent {
  uint32_t type = 0;
  uint32_t value = 0;
};

// Server: an OPEN waiting for AcceptOpen or DeclineOpen.
struct OpenRequest {
  uint16_t client_slot = 0;
  uint16_t tcp_port = 0;
  uint8_t qp = 0;
  uint32_t capacity = 0;
  uint32_t rkey = 0;
  uint64_t ring_addr = 0;
};

class RdmaLink {
 public:
  // Client: makes a link to the LinkListener at `server` (options.qps QPs,
  // each a CM connect with the link hello).  nullptr with errno and
  // *error (ECONNREFUSED: no link listener there, e.g. a version-1
  // server; ETIMEDOUT; EPROTONOSUPPORT: iWARP; ENOMEM).
  static std::shared_ptr<RdmaLink> Connect(const struct sockaddr_in& server,
                                           const LinkOptions& options,
                                           std::string* error);
  ~RdmaLink();
  RdmaLink(const RdmaLink&) = delete;
  RdmaLink& operator=(const RdmaLink&) = delete;

  // Client: opens a connection: takes a slot and a receive slice of
  // `ring_bytes`, sends OPEN announcing `tcp_port`, and waits until
  // `deadline_ns` (CLOCK_MONOTONIC) for the answer.  0 and *out on ACCEPT.
  // -1 with errno: ECONNREFUSED (DECLINE; *cause set), ETIMEDOUT (no
  // answer by the deadline: a CANCEL was sent, and Open returns once the
  // server answered it -- its parked copy is reset by then -- or after 2 s
  // more, closing the link), ECONNRESET (the link died), EBUSY (no free
  // slot), ENOMEM (no slice), EINVAL.
  int Open(uint16_t tcp_port, uint32_t ring_bytes, int64_t deadline_ns,
           LinkConnection* out, uint8_t* cause);

  // Server: the oldest OPEN not yet answered (Poll() files them).
  bool NextOpen(OpenRequest* out);
  // Server: pairs `req` with a new slot, a receive slice of `ring_bytes` and
  // a mirror of the client's capacity, and sends ACCEPT.  0 and *out, or -1
  // with errno (ECANCELED: the client gave up meanwhile; ENOMEM / EBUSY:
  // a DECLINE was sent instead; ECONNRESET: the link died).
  int AcceptOpen(const OpenRequest& req, uint32_t ring_bytes,
                 LinkConnection* out);
  void DeclineOpen(const OpenRequest& req, link::LinkDeclineCause cause);

  // Posts RDMA WRITEs of the `n` pieces (`sges[i]` to the peer's ring of
  // `c` at `peer_offsets[i]`), the last one a WRITE WITH IMM carrying
  // (`type`, `value`) for the peer's slot; n == 0 posts the immediate alone
  // (zero length).  `signal`: the last WR is signalled and its completion
  // files a kSlotSendDone event for `c` (the link also signals every
  // signal_every-th WR of the QP for itself).  0, or -1 with ECONNRESET
  // (link dead, or the slot already sent its last message).
  // REQUIRES: n <= 2; every piece within c.peer_capacity; value fits the
  //           immediate (link::kMaxImmCount).
  int PostToPeer(const LinkConnection& c, const ibv_sge* sges,
                 const uint64_t* peer_offsets, int n, uint32_t type,
                 uint32_t value, bool signal);
  // Convenience: one piece from `src` (`lkey`), `len` bytes at
  // `peer_offset`; len 0 posts the immediate alone.
  int PostToPeer(const LinkConnection& c, const uint8_t* src, uint32_t lkey,
                 uint64_t peer_offset, uint32_t len, uint32_t type,
                 uint32_t value, bool signal) {
    ibv_sge sge = {reinterpret_cast<uintptr_t>(src), len, lkey};
    return PostToPeer(c, &sge, &peer_offset, len > 0 ? 1 : 0, type, value,
                      signal);
  }
  // Moves the immediates that arrived for `c` since the last call to *out
  // (appended), and unlists its slot (TakeTouched) in the same step.  A link death appears as a CONTROL RESET event.  Consecutive
  // counts of one type arrive summed (kSlotSendDone: how many signalled
  // posts completed); NOPs are dropped.
  void TakeEvents(const LinkConnection& c, std::vector<SlotEvent>* out);
  // Sends the slot's last message, CLOSE or (`reset`) RESET, unless one
  // went already.  The slot and its slices are freed once the peer's last
  // message arrived too (at once if it had).  Returns the slot's
  // generation for LastMessageDone.  REQUIRES: `c` is not used for
  // PostToPeer afterwards.
  uint32_t CloseConnection(const LinkConnection& c, bool reset);
  // True once the last message CloseConnection sent left (its WR
  // completed: the NIC is done with every earlier WR of the slot), or the
  // slot was freed since (`generation`), or the link died.
  bool LastMessageDone(const LinkConnection& c, uint32_t generation) const;

  // Handles every completion and CM event available now; never blocks.
  // Returns how many it handled.
  int Poll();
  // Poll(), and if nothing was pending sleeps (arming the CQ) until a
  // completion or CM event or `deadline_ns`, at most 1 ms at a time (other
  // threads may take the event).  Returns Poll()'s count after the wait.
  int Wait(int64_t deadline_ns);
  // Consumes delivered completion-channel events and arms the CQ, so that
  // completion_fd() fires for the next completion; then Poll().
  int Arm();
  // Arms the CQ unless an arm is outstanding, then Poll(); reads nothing
  // from the completion channel.  For a connection about to sleep: an
  // event already delivered is the watcher's to consume (LinkWatch, or
  // Wait()), which then arms again and polls, so no completion is missed,
  // and the sleeper neither reads the channel (a system call) nor holds
  // mu_ for it against the progress thread.
  int ArmIfIdle();
  // Handles the CM events pending on cm_fd() (a disconnect).
  void PollCm();

  // Which slots got events, for the progress thread (link_watch.h): a
  // slot's first event since the last TakeTouched() or TakeEvents() lists
  // it.  Whoever polled for its own slot calls SignalTouched(own) after its
  // TakeEvents: the own slot is unlisted unless events came since, and if
  // slots remain listed the wake descriptor (SetWakeFd, an eventfd) is
  // written once until the next TakeTouched().  Every poll outside the
  // progress thread is followed by a SignalTouched (Open's and the send
  // queue's waits do it themselves), and a Wait() that took the CQ's event
  // arms the CQ again: no event is left unseen.
  void SetWakeFd(int fd);
  void SignalTouched(uint16_t own_slot);
  void TakeTouched(std::vector<uint16_t>* out);
  // Server: OPENs are waiting (NextOpen).
  bool HasOpens() const;

  // The peer's address (QP 0's CM id).  False if unknown.
  bool PeerAddress(struct sockaddr_storage* out) const;

  bool dead() const;
  bool is_server() const { return server_; }
  uint8_t qp_count() const { return static_cast<uint8_t>(qps_.size()); }
  uint64_t link_id() const { return link_id_; }
  // Slots in use (open, opening, or waiting for the peer's last message).
  size_t slots_in_use() const;
  // Registered bytes of both slabs, and ibv_reg_mr calls made by them.
  size_t registered_bytes() const;
  uint64_t registrations() const;
  // The device's pool (process lifetime), for RdmaChannel::OnLink.
  MemoryPool* pool() const { return pool_; }
  int completion_fd() const { return cc_ != nullptr ? cc_->fd : -1; }
  int cm_fd() const { return ec_ != nullptr ? ec_->fd : -1; }

 private:
  friend class LinkListener;
  friend class RdmaLinkTestPeer;  // tests/rdma/rdma_hostile_peer_test.cc
  struct Qp {
    rdma_cm_id* id = nullptr;
    uint32_t sq_inflight = 0;
    uint32_t unsignalled = 0;
    uint32_t max_inline = 0;
    LinkSlice recv_bufs;  // recv_queue_depth control buffers
    LinkSlice send_bufs;  // send_queue_depth control buffers (no inline)
    uint32_t send_next = 0;
    bool established = false;
  };
  enum class SlotState { kFree, kOpening, kOpen, kCancelled };
  struct Slot {
    SlotState state = SlotState::kFree;
    uint8_t qp = 0;
    bool sent_last = false;
    bool got_last = false;
    bool close_done = false;  // our last message's WR completed (or none)
    // No local user reads or writes the slices any more (CloseConnection,
    // or no connection was ever handed out).  The slot's last message may
    // go before (a CANCEL answered with RESET): its slices stay until then.
    bool released = false;
    bool answered = false;  // client: ACCEPT or DECLINE arrived
    uint8_t cause = 0;
    LinkConnection conn;
    std::vector<SlotEvent> inbox;
  };
  // Server: what became of a client's slot's OPEN.
  enum class PeerOpen : uint8_t { kNone, kQueued, kCancelled, kAccepted };

  RdmaLink(bool server, const LinkOptions& options)
      : server_(server), opt_(options) {}
  // Creates CQ, slabs (once, on `verbs`), then the QP for `id` with its
  // receives posted.  Takes ownership of `id`.  False with errno/*error.
  bool AddQp(rdma_cm_id* id, std::string* error);
  bool InitShared(ibv_context* verbs, std::string* error);

  // All below REQUIRE mu_ held.
  int PollLocked();
  void HandleCompletion(const ibv_wc& wc);
  void HandleControl(uint8_t qp, const uint8_t* data, uint32_t len);
  void HandleImm(uint32_t imm);
  // Appends `e` to the slot's inbox (merging counts; NOPs dropped; a flood
  // past kMaxInbox entries becomes that connection's RESET).
  void FileEventLocked(Slot& s, SlotEvent e);
  // Lists `s` for TakeTouched (once until then) / unlists `slot`.
  void TouchLocked(Slot& s);
  void UntouchLocked(uint16_t slot);
  // Writes the wake descriptor if slots are listed (or OPENs wait) and it
  // was not written since the last TakeTouched().
  void SignalTouchedLocked();
  static constexpr size_t kMaxInbox = 65536;
  void HandleCmEventsLocked();
  int PostRecv(uint8_t qp, uint32_t index);
  int ReserveLocked(uint8_t qp, uint32_t wrs);
  // Posts the chain `first` (`count` WRs); the last one is signalled if
  // `tag` is nonzero (kForceBit, or kCloseBit | slot) or the QP's period
  // is reached.
  int PostSendLocked(uint8_t qp, ibv_send_wr* first, uint32_t count,
                     uint64_t tag);
  int SendControlLocked(uint8_t qp, const link::Control& c);
  void SendLastLocked(uint16_t slot, bool reset);
  void FreeSlotLocked(uint16_t slot);
  // Frees the slot once both last messages crossed, ours completed and no
  // local user is left.
  void MaybeFreeSlotLocked(uint16_t slot);
  bool TakeSlotLocked(uint16_t* slot);
  // Client, after a CANCEL: waits (bounded) until the server answered it.
  void WaitForCancelAnswer(uint16_t slot);
  void DieLocked(const char* why);
  // Arms the CQ unless it is armed or the link is dead (a failure kills it).
  void ArmLocked();

  const bool server_;
  LinkOptions opt_;
  uint64_t link_id_ = 0;
  uint16_t peer_slots_ = 0;
  rdma_event_channel* ec_ = nullptr;
  ibv_comp_channel* cc_ = nullptr;
  ibv_cq* cq_ = nullptr;
  MemoryPool* pool_ = nullptr;  // the device's (process lifetime)
  ibv_pd* pd_ = nullptr;        // pool_'s PD
  std::unique_ptr<LinkSlab> rx_slab_;
  std::unique_ptr<LinkSlab> tx_slab_;
  std::vector<Qp> qps_;

  mutable std::mutex mu_;
  bool dead_ = false;
  bool cq_armed_ = false;
  uint32_t polls_ = 0;  // CM events are read every 64th Poll()
  std::vector<Slot> slots_;
  std::vector<uint32_t> slot_frees_;      // by slot: times freed (Open's cancel wait)
  std::vector<uint16_t> free_slots_;
  std::vector<PeerOpen> peer_open_;       // server: by client slot
  std::vector<uint16_t> peer_to_ours_;    // server: by client slot
  std::deque<OpenRequest> opens_;         // server: not yet answered
  std::vector<uint16_t> touched_;         // slots with new events
  std::vector<uint8_t> touched_flag_;     // by slot: listed in touched_
  int wake_fd_ = -1;
  bool wake_pending_ = false;             // wake_fd_ written, not yet taken
};

class LinkListener {
 public:
  // Binds and listens with rdma_cm on `addr`.  nullptr with errno/*error.
  static std::unique_ptr<LinkListener> Listen(const struct sockaddr_in& addr,
                                              const LinkOptions& options,
                                              std::string* error);
  ~LinkListener();
  LinkListener(const LinkListener&) = delete;
  LinkListener& operator=(const LinkListener&) = delete;

  // Handles the next connection request (waiting up to `timeout_ns`, -1 no
  // limit): a link hello's QP is set up and accepted (bounded by
  // connect_timeout_ns).  Returns the link once all its QPs arrived;
  // nullptr with errno EAGAIN (nothing yet, or a link still missing QPs)
  // or another errno and *error (the request was rejected).
  std::shared_ptr<RdmaLink> Accept(int64_t timeout_ns, std::string* error);
  uint16_t port() const;  // host order
  int fd() const { return ec_->fd; }

  // A listener without a CM id of its own, for requests another listener
  // took (RdmaListener hands it the version-2 hellos on its port).
  static std::unique_ptr<LinkListener> ForRequests(const LinkOptions& options);
  // Accept()'s work for a CONNECT_REQUEST `ev` already taken (and not yet
  // acknowledged: this acknowledges it).
  std::shared_ptr<RdmaLink> AcceptRequest(rdma_cm_event* ev, std::string* error);

 private:
  LinkListener() = default;
  rdma_event_channel* ec_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  LinkOptions options_;
  // Links whose QP 0 arrived but not all others, by (client ip, link id).
  std::map<std::pair<uint32_t, uint64_t>, std::shared_ptr<RdmaLink>> partial_;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_LINK_H_
