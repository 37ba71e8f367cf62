// ShmChannel: one side's data path over a ShmSegment -- the two SPSC rings
// (transmit, receive), the Doorbell that carries wake-ups, the busy-poll
// count that disarms the reader, user-space readiness, held sends
// (TCP_CORK/MSG_MORE) and the memory that follows use (populate, trim).
// See docs/PROTOCOL.md for the wake-up protocol; the short form:
//  - Readable: the consumer keeps kReaderArmed set whenever no thread of its
//    process is busy-polling; a producer that publishes data to an armed
//    reader with no wake-up pending sends one.  A busy peer costs zero
//    system calls per message.
//  - Writable: a producer that leaves less than a quarter of its window
//    free makes its wait socket unwritable with filler and sets
//    kWriterBlocked; the consumer drains the filler once at most half the
//    window is unconsumed (RingControl::writer_lift).
//
// The channel knows nothing of offers, claim deadlines, revokes or TCP
// (ShmLifecycle, shm_lifecycle.h).  It reads three facts the lifecycle
// leaves in shared memory: whether the peer has attached (the header's
// claim word says a claim was made: only then does the peer's wait socket
// exist and is it rung), whether this side stopped using the rings
// (SideState's kLocalRevoked) and whether either side stopped both rings
// (the claim word names a side's move).  It tells its events sink, off the
// fast path, when it first sees the peer attached and when a drain of its
// wait socket took a decline before that.
//
// Ownership: owns the segment's mapping, the doorbell and the side state.
// ShmTransport holds it by value (no pointer between the transport's calls
// and the ring words).
// Threads: any thread of any process holding the connection.  The send
// lock (SideState::send_lock) serialises producers, the receive lock
// consumers; what needs one says REQUIRES.  Nothing here sleeps except a
// bounded spin; the waits are the transport's (shm_data_path.cc).
#ifndef VSOCKET_FIFO_BRIDGE_SHM_CHANNEL_H_
#define VSOCKET_FIFO_BRIDGE_SHM_CHANNEL_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/side_state.h"
#include "fifo_bridge/spsc_ring.h"
#include "vsocket/transport.h"

namespace vsocket::fifo {

enum class ShmRole { kClient, kServer };

// The claim word a side's move of the stream off the rings leaves
// (SegmentHeader::claim, shm_move_to_tcp.cc).
inline constexpr uint32_t ClaimMovedBy(ShmRole role) {
  return role == ShmRole::kClient ? kMovedByClient : kMovedByServer;
}

// What a channel tells its owner; called rarely, never on the fast path.
class ShmChannelEvents {
 public:
  virtual ~ShmChannelEvents() = default;
  // Once, on the thread that first saw the peer attached.
  virtual void OnPeerAttached() = 0;
  // A client's drain took the server's decline ('D') before the peer
  // attached; `for_uid`: the users do not share memory.
  virtual void OnDeclineDrained(bool for_uid) = 0;
};

class ShmChannel {
 public:
  // Takes ownership of everything; `side` is this side's state (a slot of
  // the segment's header page, or a page of its own behind `side_fd`).
  // `attached`: the peer is known to have attached (a server, an adopted
  // connection).
  ShmChannel(ShmRole role, std::unique_ptr<ShmSegment> segment,
             std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
             bool attached);
  // REQUIRES: called once, before any other call, with a sink that
  // outlives the channel.
  void set_events(ShmChannelEvents* events) { events_ = events; }
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  ShmRole role() const { return role_; }
  ShmSegment* segment() const { return segment_.get(); }
  Doorbell* doorbell() const { return doorbell_.get(); }
  SideState* side() const { return side_; }
  int side_fd() const { return side_fd_; }
  bool side_in_segment() const { return side_in_segment_; }
  RingControl* tx() const { return tx_; }
  RingControl* rx() const { return rx_; }
  RingProducer* producer() const { return producer_.get(); }
  RingConsumer* consumer() const { return consumer_.get(); }
  // Unmaps the segment (the last close).  The rings must not be used after.
  void ReleaseSegment() { segment_.reset(); }

  // ---- What the lifecycle left in shared memory ----
  // The peer has attached (the claim word says a claim was made); the
  // first call that sees it tells the events sink.
  bool PeerAttached();
  // The last PeerAttached() answer, without a look at the header.
  bool attached() const { return attached_.load(std::memory_order_relaxed); }
  // This side no longer carries the stream on the rings (kLocalRevoked).
  bool stopped() const {
    return side_->local_flags.load(std::memory_order_acquire) & kLocalRevoked;
  }
  // The peer (resp. this side) stopped both rings: the claim word names
  // its move.  false once the segment is released.
  bool PeerStoppedRings() const;
  bool WeStoppedRings() const;

  // ---- Wake-ups (shm_wakeup.cc) ----
  void NotifyReader();  // after publishing into tx
  void SignalSelf();    // make our wait socket readable
  void AfterConsume(bool force_drain);
  // Drains our wait socket's wake-ups and clears kReaderPending (after any
  // producer in the middle of ringing finished): a wake-up that lands in
  // between leaves one spare datagram, never a missing one.  A decline
  // among them goes to the events sink (a client's, before the peer
  // attached).  Returns what it drained.
  Doorbell::Drained DrainOwnWakeups();
  void LiftPeerWriterBlock();  // after consuming from rx
  // Asks the peer's watcher thread to look at the connection (the peer's
  // pid from the header, untrusted: a wrong one wakes nobody of ours).
  // false when it could not be asked (no such process, its queue full):
  // the caller then wakes the peer's wait socket.
  bool WakePeerWatcher();
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

  // ---- Windows ----
  // What the kernel gives a socket whose application set nothing: the
  // initial tcp_wmem and tcp_rmem (the kernel grows them with use; a peer
  // that reads nothing keeps them there).
  static constexpr uint64_t kDefaultSendBuffer = 16384;
  static constexpr uint64_t kDefaultRecvBuffer = 131072;
  // Bytes our producer may keep unconsumed: our SO_SNDBUF plus the peer's
  // SO_RCVBUF, as kernel TCP keeps at most a send queue and the peer's
  // receive queue in flight; the kernel's initial sizes stand in for one
  // the application did not set.  0 (the whole ring) when neither end set
  // one.  Read on every send: either end may change it at any time.
  uint64_t SendWindow() const;
  // The writer's block threshold: a quarter of the window.
  uint64_t BlockThreshold() const { return producer_->window() / 4; }
  // Readable bytes, exact below `need` (RingConsumer::Available is a lower
  // bound while not 0: against SO_RCVLOWAT's mark the head is read again).
  int64_t AvailableAgainst(int64_t need) const {
    int64_t available = consumer_->Available();
    if (available > 0 && available < need) [[unlikely]] available = consumer_->AvailableNow();
    return available;
  }

  // ---- User-space readiness (shm_user_space_poll.cc) ----
  // Transport::PollUserSpace for a channel in use: the rings' indices and
  // flags; not exact before the peer attached.
  Transport::UserSpaceReadiness PollReadiness(uint32_t wanted);
  // A hold is the kSpinnersPollerHold bit of SideState::spinners, shared by
  // every process holding this side.  PollerHeld: it is set.  TakePollerHold:
  // sets it unless the rings are stopped or a receive sleeps in the kernel.
  bool PollerHeld() const {
    return side_->spinners.load(std::memory_order_relaxed) & kSpinnersPollerHold;
  }
  bool TakePollerHold();
  void DropUserSpaceHold();
  // Counts SideState::kernel_sleepers.
  void NoteKernelSleeper(bool asleep);

  // ---- Fork and exec of the process ----
  // The calling process's busy-polling threads die with exec, so their
  // count leaves SideState::spinners; given back if exec fails.
  void BeforeExec();
  void AfterFailedExec();
  // The parent's busy-polling threads are not this child's.
  void AfterForkInChild() {
    local_spinners_.store(0, std::memory_order_relaxed);
    trim_scheduled_ = false;  // the parent's watcher had the look
  }

  // ---- Looks asked of the liveness watcher ----
  // Asks the watcher for a look at `target` (WatchDeadlineBy: an earlier
  // one pending stays) when it goes out of scope, if armed: the idle look
  // (ArmIdleLook) or a hold's deadline (ArmAt).  Declared before a
  // SideLock, so that it runs after the unlock: the watcher thread holds
  // its mutex while it calls OnDeadline, which may take side locks, so no
  // one may call into the watcher holding one.
  class LookScheduler {
   public:
    explicit LookScheduler(LivenessTarget* target) : target_(target) {}
    ~LookScheduler();
    void ArmIdleLook();  // shm_trim.cc
    void ArmAt(int64_t at_ns) {
      if (at_ns_ == 0 || at_ns < at_ns_) at_ns_ = at_ns;
    }

   private:
    LivenessTarget* target_;
    int64_t at_ns_ = 0;  // 0: not armed
  };

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
  // Watcher thread, once a second while scheduled: a transmit ring that
  // carried no byte since the last look and that the peer has read to the
  // end gives its pages back (MADV_REMOVE; the next write faults in zero
  // pages), so a connection that was busy costs what an idle one costs.
  // Returns the next look's time, or 0 when done.  Skips a look while an
  // application thread holds the send lock.  A look may come early (the
  // deadline is shared with held sends): it then counts as a look.
  int64_t TrimIdleRing();
  // Gives back this connection's accounted bytes (the last close).
  void ForgetRingBytes();

  // ---- Held sends (shm_cork.cc) ----
  // TCP_CORK (SideState::corked) and MSG_MORE hold a send's bytes in the
  // transmit ring, unpublished, until the cork is out, a send without
  // MSG_MORE, kHoldLimit held, shutdown or close, fork, exec, a move to
  // TCP, or kHoldNs after the hold began (the liveness watcher's deadline).
  // The ring is shared memory: a peer that sees this process die takes
  // them as sent (RingConsumer::TakeHeld).
  // As kernel TCP on loopback: a held send leaves ~200 ms after the hold
  // began (209 ms measured on Linux 6.x), or once a full segment (64 KiB)
  // is held.
  static constexpr int64_t kHoldNs = 200'000'000;
  static constexpr uint64_t kHoldLimit = 64 * 1024;
  void CorkChanged(bool on);
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

 private:
  ShmRole role_;
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
  std::atomic<bool> attached_{false};  // see PeerAttached
  ShmChannelEvents* events_ = nullptr;
  // Memory accounting and the idle trim (shm_trim.cc); guarded by the send
  // lock, per process.
  bool trim_scheduled_ = false;
  uint64_t trim_look_head_ = ~uint64_t{0};  // head at the last idle look
  int64_t accounted_bytes_ = 0;             // what StatsShmMemory holds for us
  // Bytes of the transmit ring, from the position of SideState::
  // trimmed_head on, that this process's writes touched (PopulateAhead).
  // Not reset by a trim in a forked sibling: those pages then fault in.
  uint64_t populated_ = 0;
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_CHANNEL_H_
