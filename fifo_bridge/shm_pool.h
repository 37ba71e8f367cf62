// Shared-memory pools (issue 33): one sparse file per client process (and
// ring size) in the user's directory /dev/shm/vsocket-<uid>/, mapped once
// by that process and once by each process that accepts from it, carved
// into slices.  A slice holds exactly a segment's layout (shm_segment.h),
// so a ShmSegment can stand for a slice and ShmChannel does not know the
// difference.  fifo_bridge/README.md, "Pools", has the design.
//
// Names:
//   pool file:  pool-<pid>-<nonce>-<capacity>
//               <pid>: the owner's, decimal; <nonce>: 16 lowercase hex
//               digits, random per pool (a reused pid, or the same pid
//               after exec, never names the same pool again); <capacity>:
//               each ring's data bytes, decimal (the slice size follows).
//   offer:      the connection key, a symlink whose target is
//               <pool name>#<slice>#<generation> (decimal, no leading
//               zeros).  The generation is the slice's reuse count, also
//               in its header (SegmentHeader::slice_generation).
//
// Ownership:
//  - PoolMapping: one mapping of one pool file, shared (shared_ptr) by the
//    ShmSegments of its slices and, on the server, the process's cache.
//    Unmapped by its last holder.  Nothing is unmapped per connection,
//    but on a server the last slice of a pool whose owner has exited: the
//    liveness path marks the mapping (ShmSegment::NotePeerExited) and the
//    close of that last connection unmaps it (ReleasePeerPoolSlice) once
//    the owner is seen gone.
//  - The pool's file: unlinked at the owner's exit() (an atexit handler;
//    kept while a slice handed out is unclaimed), by a server dropping a
//    dead owner's pool, or by the sweep once the owner pid is gone.
//  - The owner's free list and chunk table (how many slices are carved)
//    are private memory of the client process that made the pool; a
//    forked child never hands out its parent's slices (it makes pools of
//    its own), and a slice is reused only once both sides' released bits
//    are in its header and the server's last holder has let go of it
//    (kServerDetached), or its offer was revoked unclaimed a while ago.
// Threads: every call is thread-safe.  RecoverPoolMapping runs in a signal
// handler.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_POOL_H_
#define VSOCKET_FIFO_BRIDGE_SHM_POOL_H_

#include <sys/types.h>

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/shared_file_fault_guard.h"

namespace vsocket::fifo {

// Slices per pool file: at most kPoolSlices, fewer for big rings so that a
// pool's mapping stays within kPoolAddressBytes of address space (at least
// one slice); past them, a new pool.  The file is sized for all of them at
// creation (sparse: no page is allocated before it is used), and mapped
// once whole; slices are carved from it kPoolChunkSlices at a time as the
// free list runs out, and reused before a new chunk is carved.
inline constexpr uint32_t kPoolSlices = 256;
// 128 MiB: every process that accepts from the owner maps the whole pool,
// and programs lower RLIMIT_AS after accepting (vsftpd's session process:
// 200 MiB, inherited with the listener's mappings; 512 MiB pools left it
// no room for a thread's stack).  Not smaller: 10,000 connections of
// 1 MiB rings then take 161 pools, within the fault guard's 256 slots.
inline constexpr size_t kPoolAddressBytes = size_t{128} << 20;
inline constexpr uint32_t kPoolChunkSlices = 16;
// Free slices whose ring pages stay allocated for the next connections:
// at most kPoolWarmBytes of slices (at least one, at most kPoolWarmSlices);
// a free slice below them has its ring pages punched out.
inline constexpr uint32_t kPoolWarmSlices = 64;
inline constexpr size_t kPoolWarmBytes = size_t{4} << 20;
// SegmentHeader::released bit set by the server's last holder when it no
// longer touches the slice (its ShmSegment is gone).
inline constexpr uint32_t kServerDetached = 4;

// What an offer's symlink says.
struct PoolOfferTarget {
  std::string pool;  // the pool file's name
  uint32_t owner_pid = 0;
  uint64_t capacity = 0;
  uint32_t slice = 0;
  uint32_t generation = 0;
};

// Strict parses; pure.  A pool name is exactly pool-<pid>-<nonce>-<capacity>
// as above (pid 1..2^31-1, a valid ring capacity, no leading zeros, nothing
// else: no '/', so it names a file of the same directory).
bool ParsePoolName(std::string_view name, uint32_t* owner_pid, uint64_t* capacity);
// The symlink's text: a valid pool name, a slice below kPoolSlices, a
// generation that fits 32 bits.  Whether the slice is inside the pool file
// is the mapper's check (it knows the file's size).
bool ParsePoolOfferTarget(std::string_view text, PoolOfferTarget* out);
std::string FormatPoolOfferTarget(const std::string& pool, uint32_t slice,
                                  uint32_t generation);

// Bytes of one slice (a segment's) for rings of `capacity` bytes, and of
// a whole pool of them as this build makes it.  Servers accept any whole
// number of slices from 1 to kPoolSlices (docs/PROTOCOL.md: the size is
// the owner's choice; older builds made 512 MiB pools).
size_t PoolSliceBytes(uint64_t capacity);
size_t PoolBytes(uint64_t capacity);

class ClientPool;

// One mapping of one pool file.
class PoolMapping {
 public:
  ~PoolMapping();
  PoolMapping(const PoolMapping&) = delete;
  PoolMapping& operator=(const PoolMapping&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }  // the file's, when mapped
  uint64_t capacity() const { return capacity_; }
  size_t slice_bytes() const { return slice_bytes_; }
  uint32_t slices() const { return slices_; }
  uint32_t owner_pid() const { return owner_pid_; }
  dev_t dev() const { return dev_; }
  ino_t ino() const { return ino_; }
  // REQUIRES: slice < slices().
  uint8_t* slice_base(uint32_t slice) const { return base_ + slice * slice_bytes_; }
  // The fault guard replaced (some of) its pages: no new connection may
  // use it.
  bool lost() const;
  // A server saw the liveness connection of one of its slices end without
  // a close (ShmSegment::NotePeerExited): its owner may have exited.  The
  // release of the process's last slice of it then checks the owner and
  // drops the mapping at once (ReleasePeerPoolSlice).  (The owner is
  // checked then, not here: the liveness socket closes before a killed
  // process becomes a zombie.)  Any thread.
  void MarkOwnerMayHaveExited() { owner_may_have_exited_.store(true, std::memory_order_release); }
  bool owner_may_have_exited() const {
    return owner_may_have_exited_.load(std::memory_order_acquire);
  }

 private:
  friend class PoolMaps;
  PoolMapping() = default;
  std::string name_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t capacity_ = 0;
  size_t slice_bytes_ = 0;
  uint32_t slices_ = 0;
  uint32_t owner_pid_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int registry_slot_ = -1;  // in the fault guard's table
  std::string path_;        // the file's, for the unlink of a dead owner's pool
  std::atomic<bool> owner_may_have_exited_{false};
};

// A slice held by one ShmSegment.
struct PoolSlice {
  std::shared_ptr<PoolMapping> mapping;
  ClientPool* owner = nullptr;  // set when this process hands the slice out
  uint32_t slice = 0;
  uint32_t generation = 0;
};

// Client: a slice of this process's pool of rings of `capacity` bytes for
// a new offer, in user `euid`'s directory (private: checked).  Its header
// page and ring control blocks are zeroed; InitOfferHeader writes them.
// Returns 0 or -errno (-ENOSPC: /dev/shm has no room for a chunk).
int AcquirePoolSlice(uid_t euid, uint64_t capacity, PoolSlice* out);
// Client: the ShmSegment of an acquired slice is gone.  The slice goes to
// its pool's pending list, to be reused when its header says both sides
// are done.  No-op in a process that did not acquire it (a forked child).
void ReturnPoolSlice(const PoolSlice& slice);

// Server and exec adoption: the mapping of pool `name` of user `euid`
// (this process's), cached per process: mapped on the first slice, found
// on later ones.  The file is opened O_NOFOLLOW and must be a regular
// file of that user, mode 0600, of 1 to kPoolSlices whole slices.  Unused
// mappings of gone owners, or idle ones, are unmapped on later calls.
// Returns 0 or -errno (-ENOENT: no such pool; -EINVAL/-EPERM: invalid).
int MapPeerPool(const std::string& name, uid_t euid, std::shared_ptr<PoolMapping>* out);

// Server (and exec adoption): the ShmSegment of `slice`, a slice of a
// peer's pool, is gone; `slice->mapping` is let go here.  When the mapping
// is marked (PoolMapping::MarkOwnerMayHaveExited), no other slice of it is
// in use in this process and its owner has exited (a zombie counts), the
// process's cached mapping is dropped now: the pool is unmapped on the
// calling thread (the one that closed the last connection of it; not under
// the cache's lock), and its file is unlinked while its name still names
// that file (another server of the same dead owner, or the sweep, may have
// been first).  Otherwise the cache keeps the mapping for the owner's next
// connections (MapPeerPool drops unused ones later).  Costs nothing but a
// load for an unmarked mapping.  REQUIRES: slice->owner == nullptr.
void ReleasePeerPoolSlice(PoolSlice* slice);

// Server: drops now the cached mappings that no slice uses and whose owner
// has exited (a zombie counts), or that have been unused for 10 s (the
// same rule MapPeerPool applies at most once a second, at a claim).
// Returns true while unused mappings of live owners remain cached: call
// again later (the bridge's pool cache sweeper does, from the liveness
// watcher thread, a second after a server releases a pooled slice).
// Any thread; takes the cache's lock; the munmaps happen under it.
bool DropUnusedPeerPools();

// The fault guard's recoverer for pool files (async-signal-safe): private
// zero pages over the rings of every slice in the mapping (and over a lost
// header page), RESET in every ring; the pool is marked lost.  False when
// `m` is not a pool's mapping.
bool RecoverPoolMapping(const SharedFileMapping& m);

// The user's directory of offers and pools.
std::string ShmDirectory(uid_t euid);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_POOL_H_
