// The intra-host shared-memory transport: one side of a connection whose data
// flows through two SPSC rings in a ShmSegment, with readiness carried by a
// Doorbell and liveness by the kernel TCP connection that was opened first
// (as SMC-R keeps its TCP connection).  See docs/PROTOCOL.md for the wake-up
// protocol; the short form:
//  - Readable: the consumer keeps kReaderArmed set whenever no thread of its
//    process is busy-polling; a producer that publishes data to an armed
//    reader with no wake-up pending sends one.  A busy peer costs zero
//    system calls per message.
//  - Writable: a producer that leaves less than a quarter of its window
//    free makes its wait socket unwritable with filler and sets
//    kWriterBlocked; the consumer drains the filler once at most half the
//    window is unconsumed (RingControl::writer_lift).
//  - Liveness: the TCP connection carries no data after the claim; EOF on it
//    without a FIN/RST flag in the ring means the peer died.
// Client side only: until the server claims the offer, data waits in the
// ring.  If the claim does not come within VSOCKET_CLAIM_TIMEOUT_MS, or bytes
// arrive on TCP (the listener was a plain program after all), the client
// revokes the offer, replays the ring into TCP, puts the TCP socket at the
// user's descriptor number, and retires: successor() is then a TcpTransport
// on that number, which the socket layer takes over (transport.h).  A
// retired ShmTransport carries no data itself: its data calls hand the rest
// to the successor (kStreamMoved), its other calls forward to it.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_
#define VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <mutex>

#include "fifo_bridge/descriptor_budget.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/shm_provider.h"
#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/offer_hand_out.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/side_state.h"
#include "fifo_bridge/spsc_ring.h"
#include "vsocket/inplace_view.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::fifo {

class ShmTransport final : public Transport,
                           public LivenessTarget,
                           public StreamSteps {
 public:
  enum class Role { kClient, kServer };

  // Takes ownership of everything.  `tcp_fd` is the liveness connection (not
  // the user's descriptor).  For a client, the offer is still unclaimed.
  // Returns nullptr with errno on failure (nothing is released then).
  // A server's transport is watched (peer wakes) from here on; a client's
  // only after StartWatching().
  static std::unique_ptr<ShmTransport> Create(
      Role role, std::unique_ptr<ShmSegment> segment,
      std::unique_ptr<Doorbell> doorbell, int tcp_fd,
      int64_t claim_deadline_ns);
  // Client: hands the transport to the liveness watcher (TCP liveness, the
  // claim deadline, peer wakes).  REQUIRES: set_user_fd() was called: the
  // watcher may revoke the offer at once and put the TCP socket on the
  // user's number (RetireHere), which it must find there.
  void StartWatching();
  // Client, before StartWatching(): the pid of the process that listens
  // (the marker's SO_PEERCRED).  While the offer is unclaimed the watcher
  // looks every kListenerLookNs whether it still lives and revokes the offer
  // when it does not: a listener that dies with our connection half-open
  // sends no RST, and an unclaimed client sends nothing on TCP to draw one.
  void set_listener_pid(pid_t pid) { listener_pid_ = pid; }
  ~ShmTransport() override;

  // The user's descriptor (the doorbell's wait socket).  The socket layer
  // may move it to another number with dup2 and then call set_user_fd.
  // After a retirement the doorbell has no wait socket (-1) and the number
  // names the TCP socket: the successor's.  (A peer's move can retire a
  // claimed server end before accept() has registered it: accept then
  // registered it at -1, which shrank and overran the socket table.)
  int user_fd() const override {
    if (const Transport* next = successor()) return next->user_fd();
    return doorbell_->wait_fd();
  }
  void set_user_fd(int fd) { doorbell_->set_wait_fd(fd); }
  // After a revoke the user's number names the TCP socket and the doorbell
  // has none (wait_fd() == -1): the successor moves then.
  void MoveUserFd(int fd) override;

  TransportKind kind() const override { return kShmKind; }
  uint32_t capabilities() const override;
  FallbackReason fallback_reason() const override {
    return reason_.load(std::memory_order_acquire);
  }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  bool DropStaleWakeup() override;
  int tcp_fd() const override { return tcp_fd_; }
  uint64_t send_ring_bytes() const override { return producer_->capacity(); }
  // SO_SNDBUF/SO_RCVBUF bound the bytes in flight (SendWindow).
  void BufferSizesChanged(uint32_t which) override;
  // Sets SideState::readable_above (shm_transport.cc).
  void RecvLowatChanged(uint32_t lowat) override;
  // In-place receive straight from the receive ring, which the peer wrote
  // (shm_zerocopy.cc): no copy.  The view is the ring's shared memory; the
  // peer cannot reuse it before the release returns its space.  After a
  // move to TCP, the successor's.  Sends of registered buffers keep
  // the default (one copy into the ring, as every shm send).
  ssize_t RecvInPlace(const void** data, size_t max, int flags,
                      const IoOptions& io) override;
  int ReleaseInPlace(size_t n, const IoOptions& io) override;
  void BeforeFork() override;
  void Release() override;

  // User-space readiness (shm_user_space_poll.cc): the rings' indices and
  // flags; a hold is the kSpinnersPollerHold bit of SideState::spinners,
  // shared by every process holding this side.
  UserSpaceReadiness PollUserSpace(uint32_t wanted) override;
  bool HoldForUserSpacePoll() override;
  void DropUserSpaceHold() override;
  // Counts SideState::kernel_sleepers.
  void NoteKernelSleeper(bool asleep) override;

  // Held sends (shm_cork.cc): TCP_CORK (SideState::corked) and MSG_MORE
  // hold a send's bytes in the transmit ring, unpublished, until the cork
  // is out, a send without MSG_MORE, kHoldLimit held, shutdown or close,
  // fork, exec, a move to TCP, or kHoldNs after the hold began (the
  // liveness watcher's deadline).  The ring is shared memory: a peer that
  // sees this process die takes them as sent (RingConsumer::TakeHeld).
  void CorkChanged(bool on) override;
  void PushHeldSends() override;

  // The budget entry of this connection's private descriptors, given back
  // by Release().
  void HoldDescriptors(DescriptorReservation reservation) {
    descriptors_ = std::move(reservation);
  }
  // Client of a sealed offer: keeps answering the server's hand-out request
  // (offer_hand_out.h) for as long as the connection lives.
  void KeepOfferHandOut(std::unique_ptr<OfferHandOut> hand_out) {
    hand_out_ = std::move(hand_out);
  }

  // Server side, right after a successful claim: wakes ourselves if the
  // client already wrote data.
  void AfterClaim();

  // ---- Handover across exec (defined in fifo_bridge/shm_handover.cc) ----
  // The private descriptors a new program image needs, besides the user's.
  struct InheritedFds {
    int segment = -1;  // the segment file (ShmSegment::DescriptorForExec())
    int side = -1;     // the SideState memfd; -1: in the segment's slot
    int tcp = -1;      // the liveness TCP connection
  };
  Role role() const { return role_; }
  // True when the connection can be handed to a new image: claimed, not
  // revoked, and every private descriptor exists.
  bool CanHandOver();
  InheritedFds inherited_fds() const;
  // Transport's exec hooks.  Fields: <c|s>,<segment>,<side>,<tcp>,
  // where <side> is "-" when the SideState is in the segment's slot.
  bool DescribeForExec(std::vector<std::string>* fields,
                       std::vector<int>* keep_fds) override;
  // The calling process's busy-polling threads die with exec, so their
  // count leaves SideState::spinners; given back if exec fails.
  void BeforeExec() override;
  void AfterFailedExec() override;
  // Parses DescribeForExec's fields (in the new image).  false: malformed.
  static bool ParseExecFields(const std::vector<std::string>& fields,
                              Role* role, InheritedFds* fds);
  // The parent's busy-polling threads are not this child's.
  void AfterForkInChild() override {
    local_spinners_.store(0, std::memory_order_relaxed);
    trim_scheduled_ = false;  // the parent's watcher had the look
  }
  // In the new image: rebuilds this side from inherited descriptors and
  // re-watches its liveness connection and peer wakes.  `user_fd` is the wait
  // socket, which the transport names but never closes.  Descriptors not of
  // the kind `fds` says (a regular file, a TCP socket) are left alone and
  // nullptr is returned; past that check the private descriptors belong
  // to the transport, or are closed if a deeper check fails.  *why says
  // what failed.
  static std::unique_ptr<ShmTransport> AdoptInherited(Role role, int user_fd,
                                                      const InheritedFds& fds,
                                                      const char** why);

  // ---- Moving a claimed connection to TCP (shm_move_to_tcp.cc) ----
  // The initiator stops both rings at one CAS of the claim word; the peer
  // follows: it resends over TCP what we had not read, drains what we had
  // written, and then moves too.  See Transport::MoveToKernelTcp and
  // docs/PROTOCOL.md ("Moving to TCP").
  bool MoveToKernelTcp(FallbackReason reason) override;

  // Liveness watcher thread: the TCP connection reported EOF or an error.
  // A peer that died holding bytes (TCP_CORK, MSG_MORE) left them in our
  // receive ring: they are read before the end of stream.
  bool OnLivenessEvent() override;
  // Watcher thread: a datagram naming us in the wake socket.  The peer
  // asked us to drain its filler (see BlockOurWrites), or closed/reset its
  // side (see UpdateHangup), or moved to TCP.
  void OnPeerWake() override;
  // Watcher thread.  Client before the claim: the claim deadline passed
  // while no call came to look (the application sleeps in poll/epoll with
  // its request still in the ring), the listener's process is gone, or the
  // server's decline waits in the wait socket: revoke now and continue on
  // TCP; else look again at NextUnclaimedLook.
  // After the claim: the once-a-second look at a transmit ring that carried
  // data (TrimIdleRing).  Always: held sends whose kHoldNs passed are
  // published (ReleaseHeldIfDue).
  int64_t OnDeadline() override;
  // OnDeadline's looks other than held sends'.
  int64_t NextLookAfterDeadline();
  // exit() without a close of this connection: when no other process holds
  // this side, its name is released as Release() would (the segment's
  // file, and the pages in it, go once both sides are done), so that two
  // processes that leave without closing leave no file behind.
  void OnProcessExit() override;

 private:
  // This side's last holder is done: ShmSegment::ReleaseName for our role,
  // telling it whether our liveness connection saw the peer die
  // (shm_release.cc).
  void ReleaseSegmentName();
  // Client, unclaimed: how often the watcher looks at the listener's life
  // and for a decline that no call of the application has drained.
  static constexpr int64_t kListenerLookNs = 100'000'000;
  // The next unclaimed look after `now_ns`: kListenerLookNs on, or the
  // claim deadline if sooner.
  int64_t NextUnclaimedLook(int64_t now_ns) const;
  // Client, unclaimed: true once the claim deadline has passed at `now_ns`
  // and the listener's progress through our earlier offers does not move
  // it later (fifo_bridge/claim_progress.h); else moves it and returns
  // false.  Any thread.
  bool ClaimDeadlinePassed(int64_t now_ns);

  ShmTransport() = default;
  // The object for one side over `segment`, with the given side state and
  // descriptors (all owned from now on); watches nothing yet.  Shared by
  // Create() and AdoptInherited().
  static std::unique_ptr<ShmTransport> Assemble(
      Role role, std::unique_ptr<ShmSegment> segment,
      std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
      int tcp_fd, int64_t claim_deadline_ns, bool claimed);

  // The offer was revoked (by this process or another holder of the
  // connection): the connection runs on TCP now.
  bool revoked() const;
  // Client: revoke the offer if it is unclaimed and `force` or past its
  // deadline.  Returns true when the connection is now on TCP.
  bool MaybeRevoke(bool force, FallbackReason reason);
  // This process's half of a revoke: the TCP socket goes to the user's
  // descriptor number (epoll registrations follow: descriptor_swap.h) and
  // a TcpTransport on that number becomes successor().  Idempotent; any
  // thread.  REQUIRES: the offer is revoked, or both side locks are held
  // by a revoke in progress.  Lock order: side locks, then retire_mu_.
  // true when this call retired it (once per process).
  bool RetireHere(FallbackReason reason);
  // Counts this process's view of the connection as moved to TCP (once:
  // pass RetireHere's result).
  void CountMove(bool retired, FallbackReason reason, const char* detail);
  bool IsClaimed();

  // ---- The peer's move to TCP (shm_move_to_tcp.cc) ----
  // The peer has moved the connection to TCP (its CAS of the claim word).
  bool PeerMovedToTcp() const;
  // This side (this process or another holder of it) moved it.
  bool WeMovedToTcp() const;
  // Our half of the peer's move: resend [peer's tail, our head) of the tx
  // ring over TCP (once per connection, whichever holder comes first), and
  // once the rx ring is empty, retire here.  Until then receives drain the
  // ring and sends go to TCP.  Any thread; may block on TCP for the resend.
  // Lock order: send lock, then receive lock (as MaybeRevoke).
  void FollowPeerToTcp();
  // A send after the resend: straight to the TCP connection, non-blocking.
  ssize_t SendOnTcp(const struct iovec* iov, int iovcnt, size_t skip);
  // Writes ring bytes [from, to) of `data` (a ring of `capacity` bytes)
  // into TCP, waiting for room for up to 10 s.  Returns the bytes written.
  // Never a silent hole: a reset the send meets goes to pending_error (the
  // program sees it), and one it gives up on resets the TCP connection.
  uint64_t SendRingBytesToTcp(const uint8_t* data, uint64_t from, uint64_t to);

  // ---- StreamSteps (vsocket/stream_io.h): SendMsg/RecvMsg ----
  // BeginCall opens a blocking receive's busy-poll phase before its first
  // attempt (so a peer replying within the budget sees us as not armed and
  // sends no wake-up); the first wait spends the budget, a later one or
  // EndCall closes the phase.
  void BeginCall(StreamCall& call) override;
  void EndCall(StreamCall& call) override;
  ssize_t TrySend(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip) override;
  ssize_t TryRecv(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip, bool peek) override;
  int WaitWritable(StreamCall& call) override;
  int WaitReadable(StreamCall& call) override;
  // successor(), after making this process's half of a revoke another
  // holder made; nullptr while the connection runs on shared memory.
  Transport* MovedTo() override;

  // ---- Memory that follows use (shm_trim.cc) ----
  // After a send: accounts the transmit ring's newly touched bytes
  // (StatsShmMemory); true once kTrimAfterBytes went through it since the
  // last trim and the idle look is to be scheduled (LookScheduler).
  // REQUIRES: the send lock.
  bool AfterRingWrite();
  // Before writing `len` bytes: when they reach 16 KiB or more into pages
  // of the transmit ring not touched since the last trim, those pages are
  // populated with one madvise(MADV_POPULATE_WRITE), not one fault per
  // 4 KiB (a fresh connection that streams 1 MB spent 40% of its sender's
  // time in shmem faults).  Only what the write touches: memory still
  // grows with use.  REQUIRES: the send lock.
  void PopulateAhead(uint64_t len);
  bool RingPopulated() const { return populated_ >= producer_->capacity(); }
  // Asks the watcher for a look (WatchDeadlineBy: an earlier one pending
  // stays) when it goes out of scope, if armed: the idle look
  // (ArmIdleLook) or a hold's deadline (ArmAt).  Declared before a
  // SideLock, so that it runs after the unlock: the watcher thread holds
  // its mutex while it calls OnDeadline, which may take side locks, so no
  // one may call into the watcher holding one.
  class LookScheduler {
   public:
    explicit LookScheduler(ShmTransport* t) : t_(t) {}
    ~LookScheduler();
    void ArmIdleLook();  // shm_trim.cc
    void ArmAt(int64_t at_ns) {
      if (at_ns_ == 0 || at_ns < at_ns_) at_ns_ = at_ns;
    }

   private:
    ShmTransport* t_;
    int64_t at_ns_ = 0;  // 0: not armed
  };
  // Watcher thread, once a second while scheduled: a transmit ring that
  // carried no byte since the last look and that the peer has read to the
  // end gives its pages back (MADV_REMOVE; the next write faults in zero
  // pages), so a connection that was busy costs what an idle one costs.
  // Returns the next look's time, or 0 when done.  Skips a look while an
  // application thread holds the send lock.  A look may come early (the
  // deadline is shared with held sends): it then counts as a look.
  int64_t TrimIdleRing();
  // Gives back this connection's accounted bytes (Release).
  void ForgetRingBytes();

  // ---- Held sends (shm_cork.cc) ----
  // As kernel TCP on loopback: a held send leaves ~200 ms after the hold
  // began (209 ms measured on Linux 6.x), or once a full segment (64 KiB)
  // is held.
  static constexpr int64_t kHoldNs = 200'000'000;
  static constexpr uint64_t kHoldLimit = 64 * 1024;
  // After a Write with `hold` that took bytes, `held_before` having been
  // held before it: starts the hold's clock (and asks `looks` for the
  // deadline), or publishes when the hold is full or the writer would
  // block on bytes the peer cannot read.  REQUIRES: the send lock.
  void AfterHeldWrite(uint64_t held_before, LookScheduler& looks);
  // Publishes what is held and wakes the reader.  REQUIRES: the send lock.
  void PublishHeldLocked();
  // The same, taking the send lock, only if something is held.  Any
  // thread; REQUIRES: no side lock held.
  void PublishHeld();
  // Watcher thread: publishes a hold older than kHoldNs.  Returns when to
  // look again (0: nothing held).
  int64_t ReleaseHeldIfDue();

  // TryRecv's attempt under the receive lock; `returning_to_user`: an
  // -EAGAIN goes back to the application (drain our wake-ups then).
  ssize_t ReadOnce(const struct iovec* iov, int iovcnt, size_t skip,
                   bool peek, bool returning_to_user);
  // Readable bytes, exact below `need` (RingConsumer::Available is a lower
  // bound while not 0: against SO_RCVLOWAT's mark the head is read again).
  int64_t AvailableAgainst(int64_t need) const {
    int64_t available = consumer_->Available();
    if (available > 0 && available < need) [[unlikely]] available = consumer_->AvailableNow();
    return available;
  }
  // Looks at the liveness connection; updates local flags.  Never blocks.
  void CheckLiveness();

  // Bytes our producer may keep unconsumed: our SO_SNDBUF plus the peer's
  // SO_RCVBUF, as kernel TCP keeps at most a send queue and the peer's
  // receive queue in flight; the kernel's initial sizes stand in for one
  // the application did not set.  0 (the whole ring) when neither end set
  // one.  Read on every send: either end may change it at any time.
  uint64_t SendWindow() const;
  // The writer's block threshold: a quarter of the window.
  uint64_t BlockThreshold() const { return producer_->window() / 4; }
  void NotifyReader();          // after publishing into tx
  // Asks the peer's watcher thread to look at the connection (the peer's
  // pid from the header, untrusted: a wrong one wakes nobody of ours).
  // false when it could not be asked (no such process, its queue full):
  // the caller then wakes the peer's wait socket.
  bool WakePeerWatcher();
  // Client, unclaimed: a drain found the server's decline (decline_seen_);
  // revoke now.  True when the connection is on TCP.  REQUIRES: no side
  // lock held (MaybeRevoke takes both).
  bool TakeDecline();
  // The reason a decline the client took gives the move: uid_mismatch or
  // claim_declined.
  FallbackReason DeclineReason() const;
  // Client, unclaimed, inside a call on the descriptor or on the watcher
  // thread: drains the wait socket; true when that found a decline.  What
  // else it held is put back as one wake-up of our own.
  bool LookForDecline();
  void SignalSelf();            // make our wait socket readable
  void AfterConsume(bool force_drain);
  // Drains our wait socket's wake-ups and clears kReaderPending (after any
  // producer in the middle of ringing finished): a wake-up that lands in
  // between leaves one spare datagram, never a missing one.  A decline
  // among them sets decline_seen_ (an unclaimed client's).  Returns what
  // it drained.
  Doorbell::Drained DrainOwnWakeups();
  void LiftPeerWriterBlock();   // after consuming from rx
  // tx nearly full: arms the peer's wake-up of our wait socket.  False
  // when that cannot be armed (the peer's socket refuses our filler: it
  // is gone, or shut down reading).
  bool BlockOurWrites();
  // Raises POLLRDHUP on the user's descriptor once no more data can arrive,
  // and POLLHUP once neither direction can carry data (or on a reset), as
  // kernel TCP does.  Any thread; cheap and idempotent.
  void UpdateHangup();
  void BeginSpin();
  void EndSpin();
  // Takes `count` off SideState::spinners; re-arms when that leaves none.
  void RemoveSpinners(uint32_t count);
  // The consumer is armed again: set kReaderArmed, and ring ourselves if
  // data arrived while we were not.
  void Rearm();
  void ResetConnection(const char* why);
  // -ECONNRESET the first time a reset is reported, then -EPIPE for sends
  // and 0 (EOF) for receives.
  ssize_t ResetOutcome(bool sending);

  Role role_ = Role::kClient;
  std::unique_ptr<ShmSegment> segment_;
  std::unique_ptr<Doorbell> doorbell_;
  SideState* side_ = nullptr;
  int side_fd_ = -1;  // the memfd behind side_ (-1: in the segment, or anonymous)
  // side_ is this side's slot of the segment's header page (unsealed
  // segments): no page or descriptor of its own.
  bool side_in_segment_ = false;
  // Threads of this process inside BeginSpin/EndSpin (side_->spinners
  // counts those of every process sharing the connection).
  std::atomic<uint32_t> local_spinners_{0};
  uint32_t spinners_taken_for_exec_ = 0;  // BeforeExec -> AfterFailedExec
  RingControl* tx_ = nullptr;
  RingControl* rx_ = nullptr;
  std::unique_ptr<RingProducer> producer_;
  std::unique_ptr<RingConsumer> consumer_;
  int tcp_fd_ = -1;
  // Client, unclaimed: the claim deadline, moved later by the listener's
  // progress (ClaimDeadlinePassed); read by any thread.
  std::atomic<int64_t> claim_deadline_ns_{0};
  int64_t offer_made_ns_ = 0;  // client: when the offer was made
  pid_t listener_pid_ = 0;  // client: 0 = unknown (no look)
  // Client, unclaimed: a drain of the wait socket took the server's
  // decline (Doorbell::DeclineOffer); TakeDecline acts on it.
  std::atomic<bool> decline_seen_{false};
  // ... and that decline said the users do not share memory (uid_mismatch
  // rather than claim_declined).  Set before decline_seen_.
  std::atomic<bool> decline_for_uid_{false};
  bool wakes_watched_ = false;  // WatchWakes(my wake name)
  std::atomic<bool> claimed_{false};
  bool watched_ = false;  // registered with the liveness watcher
  std::atomic<FallbackReason> reason_{FallbackReason::kNone};
  std::mutex retire_mu_;  // serialises RetireHere
  DescriptorReservation descriptors_;
  std::unique_ptr<OfferHandOut> hand_out_;  // see KeepOfferHandOut
  // Memory accounting and the idle trim (shm_trim.cc); guarded by the send
  // lock, per process.
  bool trim_scheduled_ = false;
  uint64_t trim_look_head_ = ~uint64_t{0};  // head at the last idle look
  int64_t accounted_bytes_ = 0;             // what StatsShmMemory holds for us
  // Bytes of the transmit ring, from the position of SideState::
  // trimmed_head on, that this process's writes touched (PopulateAhead).
  // Not reset by a trim in a forked sibling: those pages then fault in.
  uint64_t populated_ = 0;
  // The in-place view (shm_zerocopy.cc), one per connection in this
  // process.
  std::mutex inplace_mu_;      // guards inplace_view_
  InPlaceView inplace_view_;   // a view of the receive ring
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_
