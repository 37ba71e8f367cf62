#include "fifo_bridge/pool_cache_sweeper.h"

#include <cstdint>

#include "fifo_bridge/liveness_watcher.h"
#include "fifo_bridge/shm_pool.h"
#include "vsocket/wait.h"

namespace vsocket::fifo {
namespace {

constexpr int64_t kLookAfterNs = 1'000'000'000;

// Runs on the liveness watcher thread (OnDeadline), under its mutex.
class PoolCacheSweeper : public LivenessTarget {
 public:
  bool OnLivenessEvent() override { return false; }
  int64_t OnDeadline() override {
    return DropUnusedPeerPools() ? MonotonicNs() + kLookAfterNs : 0;
  }
};

PoolCacheSweeper& Sweeper() {
  static PoolCacheSweeper* sweeper = new PoolCacheSweeper();  // never destroyed
  return *sweeper;
}

}  // namespace

void SchedulePeerPoolSweep() { WatchDeadlineBy(&Sweeper(), MonotonicNs() + kLookAfterNs); }

}  // namespace vsocket::fifo
