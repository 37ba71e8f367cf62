// Process-wide registered memory for the RDMA backend.
//
// Registering memory (ibv_reg_mr) pins pages and costs a system call and a
// device round trip.  A MemoryPool owns, for one ibv_context:
//   - one protection domain (shared by every connection on the device);
//   - RING blocks: each receive ring's data area (never its control block,
//     which the channel keeps in ordinary memory) is its own mapping with
//     its OWN memory region, registered IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
//     (never REMOTE_READ) when the connection is made and deregistered when
//     it closes.  A peer's rkey therefore reaches its own connection's ring
//     and nothing else, and dies with the connection.  Their total is
//     bounded by the arena size (VSOCKET_RDMA_POOL_MB);
//   - a BOUNCE arena registered IBV_ACCESS_LOCAL_WRITE only, once: each
//     connection's send-side mirror ring (the one copy from user memory)
//     is carved from it; peers cannot touch it.
//
// Ownership: pools live until the process exits (never destroyed; connections
// may be torn down from any thread at any time).  Blocks are owned by the
// connection that allocated them and returned with Free().
// Threading: all methods are thread-safe.
#ifndef VSOCKET_RDMA_BACKEND_MEMORY_POOL_H_
#define VSOCKET_RDMA_BACKEND_MEMORY_POOL_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace vsocket::rdma {

enum class ArenaKind { kRing, kBounce };

// A piece of one arena.  Plain value; `addr == nullptr` means empty.
struct PoolBlock {
  uint8_t* addr = nullptr;
  size_t size = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;  // meaningful for kRing only
  ArenaKind kind = ArenaKind::kRing;
  ibv_mr* mr = nullptr;  // kRing: the block's own registration
};

class MemoryPool {
 public:
  // The pool for `ctx`, created (PD allocated, both arenas registered) on
  // first use.  VSOCKET_RDMA_POOL_MB (default 32): the bounce arena's size,
  // and the limit on the ring blocks' total.
  // Returns nullptr and sets errno (and *error) if the PD or a registration
  // fails, e.g. ENOMEM when RLIMIT_MEMLOCK is too low.
  static MemoryPool* ForDevice(ibv_context* ctx, std::string* error);

  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  ibv_pd* pd() const { return pd_; }

  // A block of at least `bytes` (rounded up to 4 KiB, page aligned), or an
  // empty block with errno = ENOMEM when the arena (or the ring limit) is
  // exhausted.  kRing blocks are registered here, one MR each.
  PoolBlock Allocate(ArenaKind kind, size_t bytes);
  // REQUIRES: `block` came from Allocate() on this pool and is not yet freed.
  void Free(const PoolBlock& block);

  // Bytes currently handed out of each arena (for stats and tests).
  size_t InUse(ArenaKind kind) const;

 private:
  struct Arena {
    uint8_t* base = nullptr;
    size_t size = 0;
    ibv_mr* mr = nullptr;
    std::map<size_t, size_t> free;  // offset -> length, coalesced
    size_t in_use = 0;
  };

  explicit MemoryPool(ibv_context* ctx) : ctx_(ctx) {}
  bool Init(size_t arena_bytes, std::string* error);
  bool InitArena(Arena* arena, size_t bytes, int access, std::string* error);
  PoolBlock AllocateRing(size_t bytes);

  ibv_context* const ctx_;
  ibv_pd* pd_ = nullptr;
  mutable std::mutex mu_;
  size_t ring_limit_ = 0;   // set once by Init
  size_t ring_in_use_ = 0;  // guarded by mu_
  Arena bounce_;  // guarded by mu_ (free list, in_use)
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_MEMORY_POOL_H_
