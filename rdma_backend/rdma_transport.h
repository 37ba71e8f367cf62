// RdmaTransport: vsocket's Transport (vsocket/transport.h) over one
// RdmaChannel, for connections whose path selection chose RDMA
// (rdma_negotiation.h).
//
// Readiness.  The application's descriptor is the user end of a
// ReadinessSocket.  Its POLLIN shows "data, EOF, shutdown(SHUT_RD) or a
// reset is pending"; its POLLOUT shows "a send can make progress" (the peer
// granted ring space, with hysteresis: cleared when the ring is full, set
// again once a quarter is free) or a send would fail at once.  Whoever
// changes the channel's state (a caller, or the process's RDMA progress
// thread when the completion or CM fd fires) updates both, under the lock.
//
// User-space readiness.  An interposed poll/epoll/select (or vsocket_poll)
// looks at the CQ itself through PollUserSpace() and holds the connection
// while it spins: no CQ arming, so no progress-thread wake-up and no token
// datagram per message (rdma_transport_core.h, "User-space polling").
//
// Waiting.  Calls never sleep inside the channel.  A blocking call spins up
// to IoOptions::spin_ns polling the CQ, then arms the CQ and sleeps in
// poll() on its own user descriptor and the channel's completion and CM fds
// (handling what arrives itself; the progress thread serves everyone else).  A signal
// interrupts the sleep with EINTR, a timeout ends it with EAGAIN.
//
// Threading: thread-safe (one mutex per connection serialises every channel
// call; nobody sleeps holding it).  Two threads may block in RecvMsg.
//
// Fork: verbs resources do not survive fork() (no ibv_fork_init; the child's
// copy of the registered memory is not the device's).  A forked child's copy
// of the connection is unusable: every call fails with ECONNRESET (ENOTCONN
// for shutdown) and Release() only closes the child's descriptors, leaving
// the parent's connection untouched.  The parent keeps working; when the
// parent closes, the connection ends even if a child still holds a copy.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_H_
#define VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_H_

#include <memory>

#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/rdma_provider.h"
#include "rdma_backend/readiness_socket.h"
#include "vsocket/stream_io.h"
#include "vsocket/transport.h"

namespace vsocket::rdma {

class RdmaTransport final : public Transport, public StreamSteps {
 public:
  // Wraps an established `channel` and its opened readiness socket, before
  // the kernel TCP twin exists or is known.  Only the progress thread's
  // watch can fail here: the caller opens `ready` before the peer commits
  // (client: before its probe; server: before rdma_accept).  On failure
  // returns nullptr with errno, the channel reset (the peer's copy fails
  // with ECONNRESET).
  // REQUIRES: ready->Open() succeeded.
  static std::unique_ptr<RdmaTransport> Create(
      std::unique_ptr<RdmaChannel> channel,
      std::unique_ptr<ReadinessSocket> ready);
  ~RdmaTransport() override;

  // Pairs the connection with its kernel TCP twin, the application's number
  // `fd`: `fd` names the readiness socket from now on, and the kernel
  // socket moves to a private number this transport owns.  Makes no
  // descriptor (ReadinessSocket::TakeNumber).  0, or -errno with `fd`
  // unchanged.  A transport released without it resets its channel.
  // REQUIRES: called once, by the thread that owns the transport.
  int TakeOverNumber(int fd);
  // True when the channel was reset or closed before TakeOverNumber (a
  // client that gave up after the handshake); looks at pending CM events.
  bool BrokenBeforePairing();

  TransportKind kind() const override { return kRdmaKind; }
  uint32_t capabilities() const override {
    return kCapZeroCopySend | kCapInPlaceRecv | kCapUserSpaceReadiness;
  }
  FallbackReason fallback_reason() const override {
    return FallbackReason::kNone;
  }
  ssize_t SendMsg(const struct msghdr* msg, int flags,
                  const IoOptions& io) override;
  ssize_t RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) override;
  int Shutdown(int how) override;
  int ReadableBytes() override;
  int TakeError() override;
  bool DropStaleWakeup() override;
  // Sets Core::readable_above and shows it on the descriptor.
  void RecvLowatChanged(uint32_t lowat) override;
  // TCP_CORK and MSG_MORE hold sends in the channel (rdma_channel.h, "Held
  // sends"); the progress thread ends a hold hold_ns after it began
  // (Core::KeepHoldBounded).  A forked child's copy ignores them.
  void CorkChanged(bool on) override;
  void PushHeldSends() override;
  UserSpaceReadiness PollUserSpace(uint32_t wanted) override;
  bool HoldForUserSpacePoll() override;
  void DropUserSpaceHold() override;
  void NoteKernelSleeper(bool asleep) override;
  int user_fd() const override;
  void MoveUserFd(int fd) override;
  int tcp_fd() const override { return tcp_fd_; }
  void BeforeFork() override;
  void Release() override;

  // Registered bytes held by this connection (for stats and tests).
  size_t registered_bytes() const;

  // Arms now every connection of this process whose completion-queue
  // arming was deferred (see "Deferred arming" in rdma_transport.cc), so a
  // kernel wait on their descriptors sees the next completion at once.
  // Any thread; one relaxed atomic load when none is deferred.
  // vsocket/kernel_wait.h calls it before poll/select/epoll_wait.
  static void ArmDeferred();
  // Posts the corked sends (rdma_channel.h, "Corking") of every connection
  // of this process that left a call with some (vsocket/kernel_wait.h,
  // BeforeWait).  Any thread; a connection whose lock is busy is inside a
  // call, which posts them itself or leaves them for its check.
  static void FlushCorked();

  // The explicit API's zero-copy calls (rdma_transport_zerocopy.cc).
  // SendRegistered: the NIC reads the application's buffer (registered
  // once per device, cached in the region), RDMA WRITE straight into the
  // peer's ring; returns after the completion.  RecvInPlace: a view of our
  // receive ring, which the NIC wrote; its ring space is credited to the
  // peer only by ReleaseInPlace.
  ssize_t SendRegistered(ZeroCopyRegion& region, size_t offset, size_t len,
                         int flags, const IoOptions& io) override;
  ssize_t RecvInPlace(const void** data, size_t max, int flags,
                      const IoOptions& io) override;
  int ReleaseInPlace(size_t n, const IoOptions& io) override;

 private:
  struct Core;  // shared with the progress thread (rdma_transport_core.h)
  class CallScope;

  // Connections still open when the process exits.  Kernel TCP delivers
  // what send() accepted even after the process is gone; RDMA needs the
  // process until the NIC has it, so an atexit handler closes each live
  // connection as close() would (bounded drain, CLOSE, disconnect): the
  // peer reads everything, then end of stream.  _exit() and signals that
  // kill skip it (the peer then sees a reset, as after a crash).
  static void RegisterLive(const std::shared_ptr<Core>& core);
  static void CloseAllAtExit();

  // Calls fn(Core&), under that core's lock, for every connection of this
  // process in the deferred list (rdma_transport.cc); one whose lock is
  // busy, or that is a forked copy or closed, is skipped.
  template <typename Fn>
  static void ForEachDeferred(Fn fn);

  explicit RdmaTransport(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  // False in a forked child's copy, or after Release(): calls fail then.
  bool Usable() const;

  // ---- StreamSteps (vsocket/stream_io.h): SendMsg/RecvMsg ----
  // Each attempt is one non-blocking channel call under Core::mu, followed
  // by Core::AfterAttempt; EndCall runs Core::LeaveCall (CallScope's job
  // for the other calls).  The waits are WaitWritable/WaitReadable below.
  void EndCall(StreamCall& call) override;
  ssize_t TrySend(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip) override;
  ssize_t TryRecv(StreamCall& call, const struct iovec* iov, int iovcnt,
                  size_t skip, bool peek) override;
  int WaitWritable(StreamCall& call) override;
  int WaitReadable(StreamCall& call) override;
  // Sleeps until the user descriptor reports `events`, or a completion or
  // CM event arrives (then handles it), or the deadline.  0 when woken (the
  // caller re-checks), -1 with EAGAIN (deadline) or EINTR.
  // REQUIRES: the caller ran Core::Sync() (CQ armed) and holds no lock.
  int SleepUntil(short events, int64_t deadline_ns);
  // A blocked call's wait: spins on the CQ for `spin_ns` until the channel
  // can take a send (WaitWritable: ring space, or a send would fail at
  // once) or has something to read (WaitReadable: data, end of stream,
  // reset, SHUT_RD), then sleeps until the user descriptor says so.  0 =
  // look again, -1 with EAGAIN (deadline) or EINTR.
  // REQUIRES: no lock held.
  int WaitWritable(uint32_t spin_ns, int64_t deadline_ns);
  int WaitReadable(uint32_t spin_ns, int64_t deadline_ns);
  // Their spin phase: true when the channel is ready, false once the
  // budget is spent and the CQ armed for sleeping.
  bool SpinUntilWritable(uint32_t spin_ns);
  // `want`: bytes to wait for (SO_RCVLOWAT, StreamCall::wait_bytes).
  bool SpinUntilReadable(uint32_t spin_ns, uint64_t want = 1);
  // The region's registration with this connection's device, made on first
  // use and cached in the region.  nullptr with errno.
  const UserRegion* RegistrationFor(ZeroCopyRegion& region);
  // Waits until the NIC completed every zero-copy send up to `ticket`
  // (RdmaChannel::ZeroCopyCompleted), or the connection broke.  Not
  // interruptible: the caller's buffer is in use until then.  0, or an
  // errno value (ECONNRESET).
  // REQUIRES: no lock held.
  int AwaitZeroCopy(uint64_t ticket, uint32_t spin_ns);
  std::shared_ptr<Core> core_;
  int tcp_fd_ = -1;  // the kernel TCP twin, once TakeOverNumber paired it
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_H_
