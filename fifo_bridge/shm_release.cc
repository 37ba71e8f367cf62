// ShmLifecycle::Release: the last close of a connection in this process.
// Only the last holder (forked children count) tells the peer: FIN, or a
// reset when unread data remains, as kernel TCP does; an unclaimed client
// offer first hands its data to TCP.
#include "fifo_bridge/shm_lifecycle.h"
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
#include "fifo_bridge/pool_cache_sweeper.h"
#include "fifo_bridge/shm_reasons.h"
#include "vsocket/linger_abort.h"
#include "vsocket/log.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

void ShmLifecycle::Release() {
  // Other holders of this side poll for themselves and hold again.
  channel_.DropUserSpaceHold();
  // What this process held goes now (its deadline goes with it), as a
  // close sends what a cork held.
  channel_.PublishHeld();
  bool last = channel_.side()->holders.fetch_sub(1, std::memory_order_acq_rel) == 1;
  if (last && !revoked()) {
    if (channel_.role() == ShmRole::kClient && !IsClaimed()) {
      // Data written before close must still arrive: hand it to TCP.
      MaybeRevoke(true, ShmReason().offer_revoked);
    }
    if (!revoked() && !PeerMovedToTcp()) {
      SideLock send_lock(&channel_.side()->send_lock);
      bool unread = channel_.consumer()->Available() != 0;
      if (unread || LingerAbortsClose(tcp_fd_)) {
        // Closing with unread data, or with SO_LINGER {1, 0}, aborts the
        // connection, as TCP sends RST.
        channel_.tx()->flags.fetch_or(kReset, std::memory_order_seq_cst);
        channel_.rx()->flags.fetch_or(kReset, std::memory_order_seq_cst);
      } else {
        channel_.tx()->flags.fetch_or(kProducerClosed, std::memory_order_seq_cst);
        channel_.rx()->flags.fetch_or(kConsumerClosed, std::memory_order_seq_cst);
      }
      channel_.tx()->reader_wake.fetch_or(kReaderPending, std::memory_order_seq_cst);
      // A peer whose last holder has closed already (it marked our
      // stream's reader gone) has nobody left to wake: its watcher would
      // only take its mutex from its own closing thread.
      if (!(channel_.tx()->flags.load(std::memory_order_seq_cst) & kConsumerClosed)) {
        channel_.WakePeerWatcher();  // first: it raises the peer's hang-up
        channel_.doorbell()->RingPeer();
      }
      // The ring carries the end of the stream; the liveness connection
      // ends with a reset, which leaves no TIME_WAIT on either side (a
      // FIN would hold the client's port for a minute, and a client that
      // connects often would run out of ports to name its offers after).
      // The peer reads the flags set above before it looks at TCP, so the
      // reset is not taken for a crash (CheckLiveness).
      if (tcp_fd_ >= 0) {
        struct linger abort_on_close = {1, 0};
        sys::setsockopt(tcp_fd_, SOL_SOCKET, SO_LINGER, &abort_on_close,
                        sizeof(abort_on_close));
      }
    }
    if (!revoked() && PeerMovedToTcp()) {
      // The peer moved to TCP before or while we closed: what it had not
      // read goes there too, and then TCP ends the stream.
      FollowPeerToTcp();
      if (!revoked() && tcp_fd_ >= 0) {
        // Bytes of the ring stay unread: the kernel would reset.
        struct linger abort_on_close = {1, 0};
        sys::setsockopt(tcp_fd_, SOL_SOCKET, SO_LINGER, &abort_on_close,
                        sizeof(abort_on_close));
      }
    }
  }
  UnwatchDeadline(&transport_);
  channel_.ForgetRingBytes();
  if (last) ReleaseSegmentName();
  if (watched_) UnwatchLiveness(tcp_fd_);
  watched_ = false;
  UnwatchPeerWakes();
  // The user's descriptor is closed by the socket layer, not here: whether
  // it is still the wait socket (a forked holder whose other holder moved
  // the connection, so revoked() without a retirement here) or already
  // TCP (RetireHere let go of the wait socket).  Closing it here too closed
  // the number twice: EBADF, or another thread's new descriptor.
  channel_.doorbell()->set_wait_fd(-1);
  channel_.doorbell()->Close();
  if (tcp_fd_ >= 0) sys::close(tcp_fd_);
  tcp_fd_ = -1;
  // A server's slice of a peer's pool: the cached mapping may now be
  // unused (pool_cache_sweeper.h).
  const bool peer_pool = channel_.segment() && channel_.segment()->pooled() &&
                         channel_.segment()->pool_slice().owner == nullptr;
  channel_.ReleaseSegment();
  if (peer_pool) SchedulePeerPoolSweep();
  descriptors_.Give();
}

void ShmLifecycle::OnProcessExit() {
  // Held bytes go now (the deadline dies with the process), unless a
  // sender holds the lock: a peer sees them at our death anyway.
  if (channel_.segment() && channel_.producer()->Held() != 0) {
    SideLock lock(&channel_.side()->send_lock, /*try_only=*/true);
    if (lock.owns_lock()) channel_.PublishHeldLocked();
  }
  // Other holders (forked children) still use the connection; an
  // unclaimed offer is left to its revoke path and the sweep.
  if (!channel_.segment() || channel_.side()->holders.load(std::memory_order_acquire) != 1 ||
      !IsClaimed() || revoked()) {
    return;
  }
  ReleaseSegmentName();
}

void ShmLifecycle::ReleaseSegmentName() {
  bool peer_gone = channel_.side()->local_flags.load(std::memory_order_acquire) & kLocalPeerGone;
  channel_.segment()->ReleaseName(channel_.role() == ShmRole::kClient, peer_gone);
}

}  // namespace vsocket::fifo
