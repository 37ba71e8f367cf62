// ShmTransport (shm_transport.h): construction, and the socket calls other
// than send and receive (shutdown, FIONREAD, SO_ERROR, buffer sizes, the
// stale wake-up filter, fork), composed of the channel's and the
// lifecycle's parts.  Elsewhere:
//   shm_data_path.cc  the StreamSteps of send/recv (vsocket/stream_io.h)
//   shm_zerocopy.cc   in-place receive
//   shm_handover.cc   AdoptInherited (and the lifecycle's exec fields)
//   shm_channel.h     the data path; shm_lifecycle.h: offer, claim, moves
#include "fifo_bridge/shm_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "base/real_libc.h"
#include "fifo_bridge/shm_provider.h"
#include "vsocket/log.h"

namespace vsocket::fifo {


namespace sys = ::vsocket::sys;

static_assert(sizeof(SegmentHeader) <= kClientSideStateSlot &&
              sizeof(SideState) <= kSideStateSlotBytes &&
              kServerSideStateSlot + kSideStateSlotBytes <= kSegmentHeaderBytes &&
              kClientSideStateSlot % alignof(SideState) == 0 &&
              kServerSideStateSlot % alignof(SideState) == 0);

std::unique_ptr<ShmTransport> ShmTransport::Create(
    Role role, std::unique_ptr<ShmSegment> segment,
    std::unique_ptr<Doorbell> doorbell, int tcp_fd, int64_t offer_made_ns) {
  bool client = role == Role::kClient;
  int side_fd = -1;
  SideState* side = segment->sealed()
                        ? CreateSideState(&side_fd)
                        : InitSideStateIn(segment->side_state_slot(client));
  if (!side) return nullptr;
  std::unique_ptr<ShmTransport> t =
      Assemble(role, std::move(segment), std::move(doorbell), side, side_fd,
               tcp_fd, offer_made_ns, /*claimed=*/!client);
  if (!client) t->lifecycle_.WatchPeerWakes();
  return t;
}

ShmTransport::ShmTransport(Role role, std::unique_ptr<ShmSegment> segment,
                           std::unique_ptr<Doorbell> doorbell, SideState* side,
                           int side_fd, bool claimed, int tcp_fd,
                           int64_t offer_made_ns)
    : channel_(role, std::move(segment), std::move(doorbell), side, side_fd,
               /*attached=*/claimed),
      lifecycle_(*this, channel_, tcp_fd, offer_made_ns) {}

std::unique_ptr<ShmTransport> ShmTransport::Assemble(
    Role role, std::unique_ptr<ShmSegment> segment,
    std::unique_ptr<Doorbell> doorbell, SideState* side, int side_fd,
    int tcp_fd, int64_t offer_made_ns, bool claimed) {
  return std::unique_ptr<ShmTransport>(
      new ShmTransport(role, std::move(segment), std::move(doorbell), side,
                       side_fd, claimed, tcp_fd, offer_made_ns));
}

ShmTransport::~ShmTransport() { lifecycle_.UnwatchPeerWakes(); }

namespace {

uint32_t KernelBufferSize(int tcp_fd, int name) {
  int value = 0;
  socklen_t len = sizeof(value);
  if (sys::getsockopt(tcp_fd, SOL_SOCKET, name, &value, &len) != 0 || value < 0)
    return 0;
  return static_cast<uint32_t>(value);
}

}  // namespace

void ShmTransport::BufferSizesChanged(uint32_t which) {
  if (Transport* next = MovedTo()) {
    next->BufferSizesChanged(which);
    return;
  }
  if (which & kSendBufferSet) {
    channel_.side()->send_buffer.store(KernelBufferSize(lifecycle_.tcp_fd(), SO_SNDBUF),
                             std::memory_order_relaxed);
  }
  if (which & kRecvBufferSet) {
    channel_.rx()->recv_window.store(KernelBufferSize(lifecycle_.tcp_fd(), SO_RCVBUF),
                           std::memory_order_seq_cst);
    // A larger window may let a blocked writer go on: let it look.
    channel_.LiftPeerWriterBlock();
    // SO_RCVLOWAT's cap follows the window.
    if (channel_.side()->readable_above.load(std::memory_order_relaxed) != 0) {
      uint32_t lowat = KernelBufferSize(lifecycle_.tcp_fd(), SO_RCVLOWAT);
      RecvLowatChanged(lowat > 1 ? lowat : 1);
    }
  }
}

void ShmTransport::RecvLowatChanged(uint32_t lowat) {
  if (Transport* next = MovedTo()) {
    next->RecvLowatChanged(lowat);
    return;
  }
  // The mark must be reachable: our ring holds at most the peer's window,
  // which is the whole ring, or (once either end set a buffer size) its
  // SO_SNDBUF plus our SO_RCVBUF, at least recv_window or the kernel's
  // initial receive buffer (SendWindow).  As kernel TCP caps the mark at
  // half its receive buffer, the mark is capped at half of that.  A mark
  // above what the initial buffer allows is made room for as kernel TCP
  // does (it grows its receive buffer to twice the mark): our SO_RCVBUF,
  // as the kernel now reports it, becomes the peer's bound.
  uint64_t window = channel_.rx()->recv_window.load(std::memory_order_relaxed);
  if (window == 0 && lowat > ShmChannel::kDefaultRecvBuffer / 2) {
    window = KernelBufferSize(lifecycle_.tcp_fd(), SO_RCVBUF);
    channel_.rx()->recv_window.store(static_cast<uint32_t>(window), std::memory_order_seq_cst);
    channel_.LiftPeerWriterBlock();
  }
  uint64_t reach = std::min<uint64_t>(channel_.consumer()->capacity(),
                                      window ? window : ShmChannel::kDefaultRecvBuffer) / 2;
  uint64_t mark = std::min<uint64_t>(lowat, std::max<uint64_t>(reach, 1));
  channel_.side()->readable_above.store(static_cast<uint32_t>(mark - 1), std::memory_order_seq_cst);
  // As the kernel's tcp_set_rcvlowat: what is queued may be enough now,
  // for a sleeper too.
  if (IsClaimed() && !revoked() &&
      channel_.consumer()->AvailableNow() >= static_cast<int64_t>(mark))
    channel_.SignalSelf();
}

uint32_t ShmTransport::capabilities() const {
  return ShmProvider()->capabilities();
}

void ShmTransport::OnPeerWake() {
  if (!IsClaimed()) return;  // spurious: the peer wakes us only after it
  if (PeerMovedToTcp()) {
    lifecycle_.FollowPeerToTcp();
    return;
  }
  channel_.LiftPeerWriterBlock();
  channel_.UpdateHangup();
}

int ShmTransport::Shutdown(int how) {
  if (Transport* next = MovedTo()) return next->Shutdown(how);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  if (how == SHUT_RD || how == SHUT_RDWR) {
    channel_.side()->local_flags.fetch_or(kLocalShutRead, std::memory_order_seq_cst);
    channel_.doorbell()->RingSelf();
  }
  if (how == SHUT_WR || how == SHUT_RDWR) {
    SideLock lock(&channel_.side()->send_lock);
    channel_.PublishHeldLocked();  // the FIN follows what a cork held, as TCP's
    uint32_t before =
        channel_.side()->local_flags.fetch_or(kLocalShutWrite, std::memory_order_seq_cst);
    // Following the peer's move to TCP, our stream's end goes there too.
    if (before & kLocalTxOnTcp) sys::shutdown(lifecycle_.tcp_fd(), SHUT_WR);
    channel_.tx()->flags.fetch_or(kProducerClosed, std::memory_order_seq_cst);
    channel_.tx()->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
    if (IsClaimed()) {
      // The watcher first: it raises POLLRDHUP over there, and the sooner
      // it runs, the likelier a woken poller sees it with the POLLIN.
      channel_.WakePeerWatcher();
      channel_.doorbell()->RingPeer();
    }
  }
  channel_.UpdateHangup();
  return 0;
}

int ShmTransport::ReadableBytes() {
  if (Transport* next = MovedTo()) return next->ReadableBytes();
  int64_t n = channel_.consumer()->AvailableNow();
  if (n < 0) return 0;
  return static_cast<int>(std::min<int64_t>(n, INT_MAX));
}

bool ShmTransport::DropStaleWakeup() {
  // The wake-up that announced a move to TCP is stale unless TCP has data.
  if (PeerMovedToTcp()) lifecycle_.FollowPeerToTcp();
  if (Transport* next = MovedTo()) return next->DropStaleWakeup();
  if (!IsClaimed()) return false;
  SideLock lock(&channel_.side()->recv_lock);
  if (revoked()) return false;
  if (channel_.side()->local_flags.load(std::memory_order_acquire) &
      (kLocalReset | kLocalShutRead | kLocalPeerGone)) {
    return false;
  }
  // Readable below SO_RCVLOWAT's mark counts as stale too (poll() would
  // not report it on kernel TCP).  0 unless the program set one.
  const int64_t above = channel_.side()->readable_above.load(std::memory_order_relaxed);
  const int64_t available = channel_.AvailableAgainst(above + 1);
  if (available > above || available < 0) return false;
  auto finished = [this] {
    return ((channel_.rx()->flags.load(std::memory_order_acquire) |
             channel_.tx()->flags.load(std::memory_order_acquire)) &
            (kProducerClosed | kReset)) != 0;
  };
  if (finished()) return false;
  channel_.LiftPeerWriterBlock();
  if (available == 0) [[likely]] {
    channel_.AfterConsume(true);
    return true;
  }
  // Bytes below the mark: drain the wake-ups that announced them, then
  // look again; bytes published after the drain ring us again (the reader
  // is armed and no wake-up is pending), and a mark reached meanwhile
  // keeps the descriptor readable.
  channel_.DrainOwnWakeups();
  if (channel_.consumer()->AvailableNow() > above || finished()) {
    channel_.SignalSelf();
    return false;
  }
  return true;
}

int ShmTransport::TakeError() {
  if (Transport* next = MovedTo()) return next->TakeError();
  if (int err = channel_.side()->pending_error.exchange(0, std::memory_order_relaxed)) return err;
  // The peer's reset, not yet reported by a call: SO_ERROR takes it, once,
  // as the kernel's sock_error() does.
  if (((channel_.rx()->flags.load(std::memory_order_acquire) |
        channel_.tx()->flags.load(std::memory_order_acquire)) & kReset) &&
      !(channel_.side()->local_flags.fetch_or(kLocalResetReported, std::memory_order_acq_rel) &
        kLocalResetReported)) {
    return ECONNRESET;
  }
  return 0;
}

Transport::UserSpaceReadiness ShmTransport::PollUserSpace(uint32_t wanted) {
  // After a revoke or a move, the kernel's view of the user's descriptor
  // is the exact one.
  if (successor()) return UserSpaceReadiness();
  return channel_.PollReadiness(wanted);
}

bool ShmTransport::HoldForUserSpacePoll() {
  if (channel_.PollerHeld()) return true;
  if (successor()) return false;
  return channel_.TakePollerHold();
}

void ShmTransport::BeforeExec() { channel_.BeforeExec(); }

void ShmTransport::AfterFailedExec() { channel_.AfterFailedExec(); }

namespace {

// The sooner of two look times, 0 standing for none.
int64_t Sooner(int64_t a, int64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

int64_t ShmTransport::OnDeadline() {
  return Sooner(channel_.ReleaseHeldIfDue(), lifecycle_.NextLookAfterDeadline());
}

void ShmTransport::MoveUserFd(int fd) {
  if (Transport* next = MovedTo()) {
    next->MoveUserFd(fd);
    return;
  }
  set_user_fd(fd);
}

void ShmTransport::BeforeFork() {
  // Held bytes go first: the child's sends must not overtake them, and
  // the hold's deadline is this process's watcher's.
  channel_.PublishHeld();
  channel_.side()->holders.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace vsocket::fifo
