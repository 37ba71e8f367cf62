// ShmLifecycle: what happens to one side of a shared-memory connection
// around its data path (ShmChannel): the client's offer until the server
// claims it (claim deadline, the listener's life, a decline), the revoke
// that replays the ring into TCP, the move of a claimed connection to TCP
// (ours, or following the peer's), the retirement in favour of a
// TcpTransport successor, liveness (the TCP connection opened first, which
// carries no byte after the claim), the last close, and the exec
// hand-over's description of the connection.
//
// Ownership: owns the liveness TCP descriptor (closed by Release), the
// descriptor budget entry and a sealed offer's hand-out; shares the
// channel and the transport it is part of (both outlive it: they are its
// owner and its owner's other member).
// Threads: any thread of any process holding the connection, and this
// process's liveness watcher thread (OnLivenessEvent, NextLookAfterDeadline,
// OnProcessExit).  Lock order: the channel's send lock, then its receive
// lock, then retire_mu_.  Calls that may block (on TCP, for a resend of
// ring bytes: up to 10 s) say so.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_LIFECYCLE_H_
#define VSOCKET_FIFO_BRIDGE_SHM_LIFECYCLE_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fifo_bridge/descriptor_budget.h"
#include "fifo_bridge/offer_hand_out.h"
#include "fifo_bridge/shm_channel.h"
#include "vsocket/transport.h"

namespace vsocket::fifo {

class ShmTransport;

class ShmLifecycle final : private ShmChannelEvents {
 public:
  // `tcp_fd` is the liveness connection (owned from now on); a client's
  // unclaimed offer was made at `offer_made_ns` (0: not a client's offer)
  // and must be claimed within VSOCKET_CLAIM_TIMEOUT_MS of it, a deadline
  // the listener's progress may move (ClaimDeadlinePassed).  Becomes the
  // channel's events sink.  REQUIRES: `transport` and `channel` outlive
  // this object.
  ShmLifecycle(ShmTransport& transport, ShmChannel& channel, int tcp_fd,
               int64_t offer_made_ns);
  ShmLifecycle(const ShmLifecycle&) = delete;
  ShmLifecycle& operator=(const ShmLifecycle&) = delete;

  int tcp_fd() const { return tcp_fd_; }
  FallbackReason reason() const { return reason_.load(std::memory_order_acquire); }
  int64_t claim_deadline_ns() const {
    return claim_deadline_ns_.load(std::memory_order_relaxed);
  }
  bool decline_seen() const { return decline_seen_.load(); }

  // ---- Watching (shm_lifecycle.cc) ----
  // Client: TCP liveness, the claim deadline and peer wakes, from now on.
  // REQUIRES: the transport's user_fd was set (ShmTransport::StartWatching).
  void StartWatching();
  // Server: peer wakes, from creation on.
  void WatchPeerWakes();
  // Server, right after a successful claim: TCP liveness; wakes ourselves
  // if the client already wrote data.
  void AfterClaim();
  // Adopted across exec: TCP liveness and peer wakes.
  void WatchAdopted();
  // Forgets the peer wakes (the transport's destructor).
  void UnwatchPeerWakes();
  void set_listener_pid(pid_t pid) { listener_pid_ = pid; }
  void HoldDescriptors(DescriptorReservation reservation) {
    descriptors_ = std::move(reservation);
  }
  void KeepOfferHandOut(std::unique_ptr<OfferHandOut> hand_out) {
    hand_out_ = std::move(hand_out);
  }

  // ---- The unclaimed offer and liveness (shm_revoke.cc) ----
  bool revoked() const { return channel_.stopped(); }
  bool IsClaimed() { return channel_.PeerAttached(); }
  // Client: revoke the offer if it is unclaimed and `force` or past its
  // deadline.  Returns true when the connection is now on TCP.  Takes both
  // side locks; may block on TCP for the replay.
  bool MaybeRevoke(bool force, FallbackReason reason);
  // Client, unclaimed: a drain found the server's decline (decline_seen_);
  // revoke now.  True when the connection is on TCP.  REQUIRES: no side
  // lock held (MaybeRevoke takes both).
  bool TakeDecline();
  // Client, unclaimed, inside a call on the descriptor or on the watcher
  // thread: drains the wait socket; true when that found a decline.  What
  // else it held is put back as one wake-up of our own.
  bool LookForDecline();
  // Looks at the liveness connection; updates local flags.  Never blocks.
  void CheckLiveness();
  // Watcher thread: see ShmTransport::OnLivenessEvent.
  bool OnLivenessEvent();
  // Watcher thread, OnDeadline's looks other than held sends': the
  // unclaimed client's (claim deadline, decline, the listener's life), or
  // after the claim the channel's idle trim.
  int64_t NextLookAfterDeadline();
  // successor(), after making this process's half of a revoke another
  // holder made; nullptr while the connection runs on shared memory.
  Transport* MovedTo();

  // ---- Moving a claimed connection to TCP (shm_move_to_tcp.cc) ----
  bool MoveToKernelTcp(FallbackReason reason);
  // Our half of the peer's move: resend [peer's tail, our head) of the tx
  // ring over TCP (once per connection, whichever holder comes first), and
  // once the rx ring is empty, retire here.  Until then receives drain the
  // ring and sends go to TCP.  Any thread; may block on TCP for the resend.
  // Lock order: send lock, then receive lock (as MaybeRevoke).
  void FollowPeerToTcp();
  // A send after the resend: straight to the TCP connection, non-blocking.
  ssize_t SendOnTcp(const struct iovec* iov, int iovcnt, size_t skip);

  // ---- The last close (shm_release.cc) ----
  // ShmTransport::Release and OnProcessExit.
  void Release();
  void OnProcessExit();

  // ---- Handover across exec (shm_handover.cc) ----
  // The private descriptors a new program image needs, besides the user's.
  struct InheritedFds {
    int segment = -1;  // the segment file (ShmSegment::DescriptorForExec())
    int side = -1;     // the SideState memfd; -1: in the segment's slot
    int tcp = -1;      // the liveness TCP connection
  };
  // True when the connection can be handed to a new image: claimed, not
  // revoked, and every private descriptor exists.
  bool CanHandOver();
  InheritedFds inherited_fds() const;
  // Fields: <c|s>,<segment>,<side>,<tcp>, where <side> is "-" when the
  // SideState is in the segment's slot.
  bool DescribeForExec(std::vector<std::string>* fields, std::vector<int>* keep_fds);
  // Parses DescribeForExec's fields (in the new image).  false: malformed.
  static bool ParseExecFields(const std::vector<std::string>& fields,
                              ShmRole* role, InheritedFds* fds);

 private:
  // ShmChannelEvents: the claim seen first (the listener's progress,
  // claim_progress.h); the server's decline drained by the channel.
  void OnPeerAttached() override;
  void OnDeclineDrained(bool for_uid) override;

  bool PeerMovedToTcp() const { return channel_.PeerStoppedRings(); }
  bool WeMovedToTcp() const { return channel_.WeStoppedRings(); }
  // The reason a decline the client took gives the move: uid_mismatch or
  // claim_declined.
  FallbackReason DeclineReason() const;
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
  // Writes ring bytes [from, to) of `data` (a ring of `capacity` bytes)
  // into TCP, waiting for room for up to 10 s.  Returns the bytes written.
  // Never a silent hole: a reset the send meets goes to pending_error (the
  // program sees it), and one it gives up on resets the TCP connection.
  uint64_t SendRingBytesToTcp(const uint8_t* data, uint64_t from, uint64_t to);
  // This side's last holder is done: ShmSegment::ReleaseName for our role,
  // telling it whether our liveness connection saw the peer die.
  void ReleaseSegmentName();

  ShmTransport& transport_;
  ShmChannel& channel_;
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
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_LIFECYCLE_H_
