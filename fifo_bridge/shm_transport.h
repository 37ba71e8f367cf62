// The intra-host shared-memory transport: one side of a connection whose data
// flows through two SPSC rings in a ShmSegment, with readiness carried by a
// Doorbell and liveness by the kernel TCP connection that was opened first
// (as SMC-R keeps its TCP connection).  The Transport the rest of vsocket
// sees, composed of two parts it holds by value and forwards to:
//  - ShmChannel (shm_channel.h): the data path -- rings, wake-ups (the
//    protocol of docs/PROTOCOL.md), busy-polling, user-space readiness,
//    held sends, trim.  It knows nothing of offers, claims or TCP.
//  - ShmLifecycle (shm_lifecycle.h): offer, claim, claim deadline, revoke,
//    liveness, the move to TCP (retire + successor), release, the exec
//    hand-over.
// The transport itself keeps the POSIX calls that use both (send/recv's
// StreamSteps and their waits, shutdown, SO_ERROR, buffer sizes, the
// stale wake-up filter, in-place receive) and the liveness watcher's
// entry points.
// Client side only: until the server claims the offer, data waits in the
// ring.  If the claim does not come within VSOCKET_CLAIM_TIMEOUT_MS, or bytes
// arrive on TCP (the listener was a plain program after all), the client
// revokes the offer, replays the ring into TCP, puts the TCP socket at the
// user's descriptor number, and retires: successor() is then a TcpTransport
// on that number, which the socket layer takes over (transport.h).  A
// retired ShmTransport carries no data itself: its data calls hand the rest
// to the successor (kStreamMoved), its other calls forward to it.
// Threads: any application thread of any process holding the connection,
// and the liveness watcher thread (the LivenessTarget calls).
#ifndef VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_
#define VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <mutex>

#include "fifo_bridge/descriptor_budget.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/offer_hand_out.h"
#include "fifo_bridge/shm_channel.h"
#include "fifo_bridge/shm_lifecycle.h"
#include "fifo_bridge/shm_provider.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/side_state.h"
#include "vsocket/inplace_view.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::fifo {

class ShmTransport final : public Transport,
                           public LivenessTarget,
                           public StreamSteps {
 public:
  using Role = ShmRole;

  // Takes ownership of everything.  `tcp_fd` is the liveness connection (not
  // the user's descriptor).  For a client, the offer is still unclaimed and
  // `offer_made_ns` (MonotonicNs) is when it was made: its claim deadline is
  // VSOCKET_CLAIM_TIMEOUT_MS later.  A server passes 0.
  // Returns nullptr with errno on failure (nothing is released then).
  // A server's transport is watched (peer wakes) from here on; a client's
  // only after StartWatching().
  static std::unique_ptr<ShmTransport> Create(
      Role role, std::unique_ptr<ShmSegment> segment,
      std::unique_ptr<Doorbell> doorbell, int tcp_fd,
      int64_t offer_made_ns);
  // Client: hands the transport to the liveness watcher (TCP liveness, the
  // claim deadline, peer wakes).  REQUIRES: set_user_fd() was called: the
  // watcher may revoke the offer at once and put the TCP socket on the
  // user's number (RetireHere), which it must find there.
  void StartWatching() { lifecycle_.StartWatching(); }
  // Client, before StartWatching(): the pid of the process that listens
  // (the marker's SO_PEERCRED).  While the offer is unclaimed the watcher
  // looks every kListenerLookNs whether it still lives and revokes the offer
  // when it does not: a listener that dies with our connection half-open
  // sends no RST, and an unclaimed client sends nothing on TCP to draw one.
  void set_listener_pid(pid_t pid) { lifecycle_.set_listener_pid(pid); }
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
  FallbackReason fallback_reason() const override { return lifecycle_.reason(); }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  bool DropStaleWakeup() override;
  int tcp_fd() const override { return lifecycle_.tcp_fd(); }
  uint64_t send_ring_bytes() const override { return channel_.producer()->capacity(); }
  // SO_SNDBUF/SO_RCVBUF bound the bytes in flight (ShmChannel::SendWindow).
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
  // The last close in this process (ShmLifecycle::Release).
  void Release() override { lifecycle_.Release(); }

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
    lifecycle_.HoldDescriptors(std::move(reservation));
  }
  // Client of a sealed offer: keeps answering the server's hand-out request
  // (offer_hand_out.h) for as long as the connection lives.
  void KeepOfferHandOut(std::unique_ptr<OfferHandOut> hand_out) {
    lifecycle_.KeepOfferHandOut(std::move(hand_out));
  }

  // Server side, right after a successful claim: wakes ourselves if the
  // client already wrote data.
  void AfterClaim() { lifecycle_.AfterClaim(); }

  // ---- Handover across exec (ShmLifecycle; shm_handover.cc) ----
  // The private descriptors a new program image needs, besides the user's.
  using InheritedFds = ShmLifecycle::InheritedFds;
  Role role() const { return channel_.role(); }
  // True when the connection can be handed to a new image: claimed, not
  // revoked, and every private descriptor exists.
  bool CanHandOver() { return lifecycle_.CanHandOver(); }
  InheritedFds inherited_fds() const { return lifecycle_.inherited_fds(); }
  // Transport's exec hooks.  Fields: <c|s>,<segment>,<side>,<tcp>,
  // where <side> is "-" when the SideState is in the segment's slot.
  bool DescribeForExec(std::vector<std::string>* fields,
                       std::vector<int>* keep_fds) override {
    return lifecycle_.DescribeForExec(fields, keep_fds);
  }
  // The calling process's busy-polling threads die with exec
  // (ShmChannel::BeforeExec).
  void BeforeExec() override;
  void AfterFailedExec() override;
  // Parses DescribeForExec's fields (in the new image).  false: malformed.
  static bool ParseExecFields(const std::vector<std::string>& fields,
                              Role* role, InheritedFds* fds) {
    return ShmLifecycle::ParseExecFields(fields, role, fds);
  }
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
  bool MoveToKernelTcp(FallbackReason reason) override {
    return lifecycle_.MoveToKernelTcp(reason);
  }

  // Liveness watcher thread: the TCP connection reported EOF or an error.
  // A peer that died holding bytes (TCP_CORK, MSG_MORE) left them in our
  // receive ring: they are read before the end of stream.
  bool OnLivenessEvent() override { return lifecycle_.OnLivenessEvent(); }
  // Watcher thread: a datagram naming us in the wake socket.  The peer
  // asked us to drain its filler (see BlockOurWrites), or closed/reset its
  // side (see UpdateHangup), or moved to TCP.
  void OnPeerWake() override;
  // Watcher thread.  Client before the claim: the claim deadline passed
  // while no call came to look (the application sleeps in poll/epoll with
  // its request still in the ring), the listener's process is gone, or the
  // server's decline waits in the wait socket: revoke now and continue on
  // TCP; else look again soon (ShmLifecycle::NextLookAfterDeadline).
  // After the claim: the once-a-second look at a transmit ring that carried
  // data (TrimIdleRing).  Always: held sends whose kHoldNs passed are
  // published (ReleaseHeldIfDue).
  int64_t OnDeadline() override;
  // exit() without a close of this connection: when no other process holds
  // this side, its name is released as Release() would (the segment's
  // file, and the pages in it, go once both sides are done), so that two
  // processes that leave without closing leave no file behind.
  void OnProcessExit() override { lifecycle_.OnProcessExit(); }

 private:
  friend class ShmLifecycle;  // Retire()s this transport

  ShmTransport(Role role, std::unique_ptr<ShmSegment> segment,
               std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
               bool claimed, int tcp_fd, int64_t offer_made_ns);
  // The object for one side over `segment`, with the given side state and
  // descriptors (all owned from now on); watches nothing yet.  Shared by
  // Create() and AdoptInherited().
  static std::unique_ptr<ShmTransport> Assemble(
      Role role, std::unique_ptr<ShmSegment> segment,
      std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
      int tcp_fd, int64_t offer_made_ns, bool claimed);

  // What the lifecycle left in shared memory, read straight from the
  // channel (the data path asks on every call).
  bool revoked() const { return channel_.stopped(); }
  bool IsClaimed() { return channel_.PeerAttached(); }
  bool PeerMovedToTcp() const { return channel_.PeerStoppedRings(); }

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
  Transport* MovedTo() override {
    if (Transport* next = successor()) return next;
    if (!revoked()) return nullptr;
    return lifecycle_.MovedTo();
  }

  // TryRecv's attempt under the receive lock; `returning_to_user`: an
  // -EAGAIN goes back to the application (drain our wake-ups then).
  ssize_t ReadOnce(const struct iovec* iov, int iovcnt, size_t skip,
                   bool peek, bool returning_to_user);

  // The data path: rings, wake-ups, readiness, held sends, trim.  By
  // value: the fast path reaches its words as it reached them when they
  // were the transport's own.
  ShmChannel channel_;
  // Offer, claim, moves, release (shm_lifecycle.h).
  ShmLifecycle lifecycle_;
  // The in-place view (shm_zerocopy.cc), one per connection in this
  // process.
  std::mutex inplace_mu_;      // guards inplace_view_
  InPlaceView inplace_view_;   // a view of the receive ring
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_TRANSPORT_H_
