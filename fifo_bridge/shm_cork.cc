// ShmChannel's held sends: TCP_CORK and MSG_MORE hold bytes as kernel TCP
// holds a partial segment, bounded in size and time.  Held bytes are in the
// transmit ring (shared memory) but not published (RingProducer::Write with
// `hold`), so they outlive this process: a peer that sees it die takes
// them as sent (CheckLiveness, RingConsumer::TakeHeld), as the kernel
// delivers what a dead process corked.  The hold's start is in SideState
// (shared by forked holders); its deadline is the liveness watcher's.
// Runs on application threads and on the liveness watcher thread.
#include <algorithm>

#include "fifo_bridge/shm_channel.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {

void ShmChannel::CorkChanged(bool on) {
  side_->corked.store(on ? 1 : 0, std::memory_order_relaxed);
  if (!on) PublishHeld();
}

void ShmChannel::AfterHeldWrite(uint64_t held_before, LookScheduler& looks) {
  if (held_before == 0) {
    int64_t now = MonotonicNs();
    side_->hold_since_ns.store(now, std::memory_order_relaxed);
    looks.ArmAt(now + kHoldNs);
  }
  // A full segment leaves, as the kernel's; so does a hold that would make
  // the writer wait for room the peer cannot make (it cannot read it).
  if (producer_->Held() >= kHoldLimit ||
      producer_->FreeSpace() < static_cast<int64_t>(BlockThreshold())) {
    PublishHeldLocked();
  }
}

void ShmChannel::PublishHeldLocked() {
  if (producer_->Publish() != 0) NotifyReader();
}

void ShmChannel::PublishHeld() {
  if (!segment_ || producer_->Held() == 0) return;  // no lock when none
  SideLock lock(&side_->send_lock);
  PublishHeldLocked();
}

int64_t ShmChannel::ReleaseHeldIfDue() {
  if (producer_->Held() == 0) return 0;
  SideLock lock(&side_->send_lock, /*try_only=*/true);
  // A sender is inside: its send may publish; look again soon.
  if (!lock.owns_lock()) return MonotonicNs() + 1'000'000;
  if (producer_->Held() == 0) return 0;
  int64_t due = side_->hold_since_ns.load(std::memory_order_relaxed) + kHoldNs;
  if (MonotonicNs() < due) return due;
  PublishHeldLocked();
  return 0;
}

}  // namespace vsocket::fifo
