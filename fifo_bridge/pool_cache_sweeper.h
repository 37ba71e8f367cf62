// A server's cache of its peers' pool mappings (shm_pool.h), emptied of
// the pools nobody uses any more without waiting for a next claim: once a
// server has let go of a pool's slice, the liveness watcher thread drops
// (DropUnusedPeerPools) the unused mappings of exited owners a second
// later, and looks again each second while unused mappings of live owners
// remain (they go after 10 s unused).  Without it a mapping of an exited
// client stayed until this process's next claim.
#ifndef VSOCKET_FIFO_BRIDGE_POOL_CACHE_SWEEPER_H_
#define VSOCKET_FIFO_BRIDGE_POOL_CACHE_SWEEPER_H_

namespace vsocket::fifo {

// Called by a server's last holder after it released a slice of a peer's
// pool.  Costs the watcher's mutex and no system call while a look is
// already due (WatchDeadlineBy).  Any thread; not while holding a lock
// the watcher's callbacks take.
void SchedulePeerPoolSweep();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_POOL_CACHE_SWEEPER_H_
