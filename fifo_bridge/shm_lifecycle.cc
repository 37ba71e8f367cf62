// ShmLifecycle (shm_lifecycle.h): construction, what it asks the liveness
// watcher to watch, and the events the channel reports.  The rest, one
// concern a file:
//   shm_revoke.cc       liveness, the unclaimed offer, revoke and replay
//   shm_move_to_tcp.cc  a claimed connection moves onto its TCP connection
//   shm_release.cc      the last close
//   shm_handover.cc     exec hand-over
#include "fifo_bridge/shm_lifecycle.h"

#include "fifo_bridge/claim_progress.h"
#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/shm_transport.h"
#include "vsocket/config.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

ShmLifecycle::ShmLifecycle(ShmTransport& transport, ShmChannel& channel,
                           int tcp_fd, int64_t offer_made_ns)
    : transport_(transport), channel_(channel), tcp_fd_(tcp_fd),
      offer_made_ns_(offer_made_ns) {
  channel_.set_events(this);
  if (offer_made_ns != 0) {
    claim_deadline_ns_.store(
        offer_made_ns + int64_t{GetConfig().claim_timeout_ms} * 1000000,
        std::memory_order_relaxed);
  }
}

void ShmLifecycle::StartWatching() {
  // Watch from the start: before the claim, bytes or EOF on TCP mean the
  // listener was a plain program or died (CheckLiveness revokes the offer).
  // Not from inside Create(): a revoke that ran before the wait socket was
  // on the user's number dup'ed TCP onto the private number, which the
  // install then closed under the successor (EBADF; found by the kill loop).
  WatchLiveness(tcp_fd_, &transport_);
  watched_ = true;
  // The claim deadline holds even while the application only sleeps; the
  // listener's life is looked at before it (OnDeadline).
  WatchDeadline(&transport_, NextUnclaimedLook(MonotonicNs()));
  WatchPeerWakes();
}

void ShmLifecycle::WatchPeerWakes() {
  WatchWakes(channel_.doorbell()->my_wake_name(), &transport_);
  wakes_watched_ = true;
}

void ShmLifecycle::UnwatchPeerWakes() {
  if (wakes_watched_) UnwatchWakes(channel_.doorbell()->my_wake_name(), &transport_);
  wakes_watched_ = false;
}

void ShmLifecycle::WatchAdopted() {
  WatchLiveness(tcp_fd_, &transport_);
  watched_ = true;
  WatchPeerWakes();
}

void ShmLifecycle::AfterClaim() {
  WatchLiveness(tcp_fd_, &transport_);
  watched_ = true;
  channel_.rx()->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
  if (channel_.consumer()->Available() != 0 ||
      (channel_.rx()->flags.load(std::memory_order_acquire) &
       (kProducerClosed | kReset))) {
    channel_.SignalSelf();
  }
  channel_.UpdateHangup();
}

void ShmLifecycle::OnPeerAttached() {
  if (listener_pid_ > 0) NoteOfferClaimed(listener_pid_, offer_made_ns_, MonotonicNs());
}

void ShmLifecycle::OnDeclineDrained(bool for_uid) {
  if (for_uid) decline_for_uid_.store(true, std::memory_order_relaxed);
  decline_seen_.store(true, std::memory_order_release);
}

}  // namespace vsocket::fifo
