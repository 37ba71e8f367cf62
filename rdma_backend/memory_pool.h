// Process-wide registered memory for the RDMA backend.
//
// Registering memory (ibv_reg_mr) pins pages and costs a system call and a
// device round trip, so it is done once per process and device, not once per
// connection.  A MemoryPool owns, for one ibv_context:
//   - one protection domain (shared by every connection on the device);
//   - a RING arena registered IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
//     (never REMOTE_READ): receive rings are carved from it and peers
//     RDMA-WRITE into them;
//   - a BOUNCE arena registered IBV_ACCESS_LOCAL_WRITE only: each
//     connection's send-side mirror ring (the one copy from user memory)
//     is carved from it; peers cannot touch it.
//
// Known limit: an rkey covers a whole MR, so a peer that knows the ring
// arena's rkey can write into any ring of the arena, including other
// connections' rings.  Scoping each ring with a type-2 memory window bound per
// connection is the planned fix (see README.md).
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
};

class MemoryPool {
 public:
  // The pool for `ctx`, created (PD allocated, both arenas registered) on
  // first use.  Arena sizes: VSOCKET_RDMA_POOL_MB (default 32) each.
  // Returns nullptr and sets errno (and *error) if the PD or a registration
  // fails, e.g. ENOMEM when RLIMIT_MEMLOCK is too low.
  static MemoryPool* ForDevice(ibv_context* ctx, std::string* error);

  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  ibv_pd* pd() const { return pd_; }

  // A block of at least `bytes` (rounded up to 4 KiB, page aligned), or an
  // empty block with errno = ENOMEM when the arena is exhausted.
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
  Arena& arena(ArenaKind kind) {
    return kind == ArenaKind::kRing ? ring_ : bounce_;
  }

  ibv_context* const ctx_;
  ibv_pd* pd_ = nullptr;
  mutable std::mutex mu_;
  Arena ring_;    // guarded by mu_ (free list, in_use)
  Arena bounce_;  // guarded by mu_
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_MEMORY_POOL_H_
