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
#include "fifo_bridge/shm_channel.h"
#include "fifo_bridge/shm_provider.h"
#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/offer_hand_out.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/side_state.h"
#include "vsocket/inplace_view.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::fifo {

class ShmTransport final : public Transport,
                           public LivenessTarget,
                           public StreamSteps,
                           private ShmChannelEvents {
 public:
  using Role = ShmRole;

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
    return channel_.doorbell()->wait_fd();
  }
  void set_user_fd(int fd) { channel_.doorbell()->set_wait_fd(fd); }
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
  uint64_t send_ring_bytes() const override { return channel_.producer()->capacity(); }
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

  // User-space readiness: the channel's (ShmChannel::PollReadiness, the
  // poller hold) while the connection runs on shared memory.
  UserSpaceReadiness PollUserSpace(uint32_t wanted) override;
  bool HoldForUserSpacePoll() override;
  void DropUserSpaceHold() override { channel_.DropUserSpaceHold(); }
  void NoteKernelSleeper(bool asleep) override { channel_.NoteKernelSleeper(asleep); }

  // Held sends: the channel's (ShmChannel, "Held sends").
  void CorkChanged(bool on) override { channel_.CorkChanged(on); }
  void PushHeldSends() override { channel_.PublishHeld(); }

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
  Role role() const { return channel_.role(); }
  // True when the connection can be handed to a new image: claimed, not
  // revoked, and every private descriptor exists.
  bool CanHandOver();
  InheritedFds inherited_fds() const;
  // Transport's exec hooks.  Fields: <c|s>,<segment>,<side>,<tcp>,
  // where <side> is "-" when the SideState is in the segment's slot.
  bool DescribeForExec(std::vector<std::string>* fields,
                       std::vector<int>* keep_fds) override;
  // The calling process's busy-polling threads die with exec
  // (ShmChannel::BeforeExec).
  void BeforeExec() override;
  void AfterFailedExec() override;
  // Parses DescribeForExec's fields (in the new image).  false: malformed.
  static bool ParseExecFields(const std::vector<std::string>& fields,
                              Role* role, InheritedFds* fds);
  // The parent's busy-polling threads are not this child's.
  void AfterForkInChild() override { channel_.AfterForkInChild(); }
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

  ShmTransport(Role role, std::unique_ptr<ShmSegment> segment,
               std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
               bool claimed);
  // The object for one side over `segment`, with the given side state and
  // descriptors (all owned from now on); watches nothing yet.  Shared by
  // Create() and AdoptInherited().
  static std::unique_ptr<ShmTransport> Assemble(
      Role role, std::unique_ptr<ShmSegment> segment,
      std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
      int tcp_fd, int64_t claim_deadline_ns, bool claimed);

  // The offer was revoked (by this process or another holder of the
  // connection): the connection runs on TCP now.
  bool revoked() const { return channel_.stopped(); }
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
  bool IsClaimed() { return channel_.PeerAttached(); }
  // ShmChannelEvents: the claim seen first (the listener's progress,
  // claim_progress.h); the server's decline drained by the channel.
  void OnPeerAttached() override;
  void OnDeclineDrained(bool for_uid) override;

  // ---- The peer's move to TCP (shm_move_to_tcp.cc) ----
  // The peer has moved the connection to TCP (its CAS of the claim word).
  bool PeerMovedToTcp() const { return channel_.PeerStoppedRings(); }
  // This side (this process or another holder of it) moved it.
  bool WeMovedToTcp() const { return channel_.WeStoppedRings(); }
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

  // TryRecv's attempt under the receive lock; `returning_to_user`: an
  // -EAGAIN goes back to the application (drain our wake-ups then).
  ssize_t ReadOnce(const struct iovec* iov, int iovcnt, size_t skip,
                   bool peek, bool returning_to_user);
  // Looks at the liveness connection; updates local flags.  Never blocks.
  void CheckLiveness();

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

  // The data path: rings, wake-ups, readiness, held sends, trim.  By
  // value: the fast path reaches its words as it reached them when they
  // were the transport's own.
  ShmChannel channel_;
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
  bool watched_ = false;  // registered with the liveness watcher
  std::atomic<FallbackReason> reason_{FallbackReason::kNone};
  std::mutex retire_mu_;  // serialises RetireHere
  DescriptorReservation descriptors_;
  std::unique_ptr<OfferHandOut> hand_out_;  // see KeepOfferHandOut
  // The in-place view (shm_zerocopy.cc), one per connection in this
  // process.
  std::mutex inplace_mu_;      // guards inplace_view_
  InPlaceView inplace_view_;   // a view of the receive ring
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_
