// ShmChannel (shm_channel.h): assembly over a segment, the facts read from
// shared memory, the send window and the reset outcome.  The rest, one
// concern a file:
//   shm_wakeup.cc            the wake-up protocol and hang-up readiness
//   shm_user_space_poll.cc   user-space readiness; the poller hold
//   shm_cork.cc              held sends (TCP_CORK, MSG_MORE)
//   shm_trim.cc              memory that follows use
#include "fifo_bridge/shm_channel.h"

#include <errno.h>

#include <algorithm>

namespace vsocket::fifo {

ShmChannel::ShmChannel(ShmRole role, std::unique_ptr<ShmSegment> segment,
                       std::unique_ptr<Doorbell> doorbell, SideState* side,
                       int side_fd, bool attached)
    : role_(role) {
  bool client = role == ShmRole::kClient;
  Direction tx = client ? Direction::kClientToServer : Direction::kServerToClient;
  Direction rx = client ? Direction::kServerToClient : Direction::kClientToServer;
  uint64_t capacity = segment->capacity();
  side_ = side;
  side_fd_ = side_fd;
  side_in_segment_ = side_fd < 0 && !segment->sealed();
  tx_ = segment->control(tx);
  rx_ = segment->control(rx);
  producer_ = std::make_unique<RingProducer>(tx_, segment->data(tx), capacity,
                                             &side->head);
  consumer_ = std::make_unique<RingConsumer>(rx_, segment->data(rx), capacity,
                                             &side->tail);
  segment_ = std::move(segment);
  doorbell_ = std::move(doorbell);
  attached_.store(attached, std::memory_order_relaxed);
}

ShmChannel::~ShmChannel() {
  // A slot of the segment goes with the segment's mapping.
  if (side_ && !side_in_segment_) DestroySideState(side_, side_fd_);
}

bool ShmChannel::PeerAttached() {
  if (attached_.load(std::memory_order_acquire)) return true;
  if (ClaimWasMade(segment_->header()->claim.load(std::memory_order_seq_cst))) {
    if (!attached_.exchange(true, std::memory_order_acq_rel)) events_->OnPeerAttached();
    return true;
  }
  return false;
}

bool ShmChannel::WeStoppedRings() const {
  return segment_ &&
         segment_->header()->claim.load(std::memory_order_acquire) == ClaimMovedBy(role_);
}

bool ShmChannel::PeerStoppedRings() const {
  uint32_t peer_move = ClaimMovedBy(role_ == ShmRole::kClient ? ShmRole::kServer
                                                              : ShmRole::kClient);
  return segment_ &&
         segment_->header()->claim.load(std::memory_order_acquire) == peer_move;
}

uint64_t ShmChannel::SendWindow() const {
  uint64_t ours = side_->send_buffer.load(std::memory_order_relaxed);
  uint64_t peers = tx_->recv_window.load(std::memory_order_relaxed);  // untrusted
  if (ours == 0 && peers == 0) return 0;
  uint64_t window = (ours ? ours : kDefaultSendBuffer) + (peers ? peers : kDefaultRecvBuffer);
  return std::max<uint64_t>(window, 4096);
}

ssize_t ShmChannel::ResetOutcome(bool sending) {
  // Kernel TCP reports a reset once; afterwards sends fail with EPIPE and
  // receives see end-of-file.
  uint32_t before = side_->local_flags.fetch_or(kLocalResetReported,
                                                std::memory_order_acq_rel);
  if (!(before & kLocalResetReported)) {
    side_->pending_error.store(0, std::memory_order_relaxed);
    return -ECONNRESET;
  }
  return sending ? -EPIPE : 0;
}

void ShmChannel::BeforeExec() {
  // The new image has no deadline for a hold of ours: what is held goes.
  PublishHeld();
  // The new image starts with no poller and no spinning thread: arm.
  DropUserSpaceHold();
  uint32_t mine = local_spinners_.load(std::memory_order_relaxed);
  if (mine != 0) RemoveSpinners(mine);
  spinners_taken_for_exec_ = mine;
}

void ShmChannel::AfterFailedExec() {
  uint32_t count = spinners_taken_for_exec_;
  spinners_taken_for_exec_ = 0;
  if (count != 0) side_->spinners.fetch_add(count, std::memory_order_seq_cst);
}

}  // namespace vsocket::fifo
