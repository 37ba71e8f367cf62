// LinkSlab: one link's registered memory (rdma_backend/README.md "Links",
// Memory).  Chunks are mapped and registered ONCE (ibv_reg_mr) with the
// slab's access flags and carved into equal power-of-two slices: a
// connection's receive ring or send mirror costs no registration of its
// own.  A chunk serves one slice size.  A chunk whose slices are all free
// again stays registered as this slab's spare for that size (one per size)
// while the process's spares stay under kMaxSpareBytes: short connections
// one after another then cost no mmap, ibv_reg_mr, page clearing,
// ibv_dereg_mr or munmap each.  Any other empty chunk is deregistered and
// unmapped at once; spares go when the slab does, or when a new chunk
// would pass the slab's limit.
//
// Two slabs per link: receive slices (IBV_ACCESS_LOCAL_WRITE |
// IBV_ACCESS_REMOTE_WRITE, never remote read: the chunk's rkey reaches the
// receive slices of that link's connections only, all to one peer
// process) and send slices (LOCAL_WRITE only: mirrors, control buffers).
//
// Ownership: the link owns its slabs; the slab owns its chunks.
// Threading: thread-compatible (the link's mutex serialises callers).
// REQUIRES at destruction: the NIC no longer uses any slice (the link's
// QPs are destroyed first).
#ifndef VSOCKET_RDMA_BACKEND_LINK_SLAB_H_
#define VSOCKET_RDMA_BACKEND_LINK_SLAB_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace vsocket::rdma {

// A piece of a chunk.  Plain value; `addr == nullptr` means empty.
struct LinkSlice {
  uint8_t* addr = nullptr;
  uint32_t size = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t chunk = 0;  // the slab's chunk id (for Free)
};

class LinkSlab {
 public:
  // `chunk_bytes`: the size of a chunk (a larger slice gets a chunk of its
  // own size).  `limit_bytes`: the most this slab keeps registered.
  LinkSlab(ibv_pd* pd, int access, size_t chunk_bytes, size_t limit_bytes);
  ~LinkSlab();
  LinkSlab(const LinkSlab&) = delete;
  LinkSlab& operator=(const LinkSlab&) = delete;

  // A slice of exactly `bytes` (a power of two, >= 64).  Its contents are
  // unspecified: zero in a new chunk, else what an earlier slice of this
  // slab held (this link's own streams: a ring's reader reads only what
  // was written after it was paired).  False with errno EINVAL (size),
  // ENOMEM (the limit, or mmap/ibv_reg_mr refused: RLIMIT_MEMLOCK).
  bool Allocate(size_t bytes, LinkSlice* out);
  // REQUIRES: `slice` came from Allocate() on this slab and is not freed.
  void Free(const LinkSlice& slice);

  // Bytes registered by this slab, spare chunks included.
  size_t registered_bytes() const { return registered_; }
  // ibv_reg_mr calls made so far (tests show slices cost none).
  uint64_t registrations() const { return registrations_; }
  size_t slices_in_use() const { return in_use_; }
  // Registered bytes held by empty (spare) chunks, this slab's.
  size_t spare_bytes() const { return spare_; }

  // The most all slabs of the process keep registered in spare chunks.
  static constexpr size_t kMaxSpareBytes = 16u << 20;

 private:
  struct Chunk {
    uint32_t id = 0;
    uint8_t* base = nullptr;
    size_t bytes = 0;
    uint32_t slice = 0;
    ibv_mr* mr = nullptr;
    std::vector<uint32_t> free;  // slice indexes
    uint32_t used = 0;
    bool spare = false;  // empty, kept (counted in spare_ and the budget)
  };
  Chunk* NewChunk(uint32_t slice);
  void DestroyChunk(size_t index);
  // Keeps the empty chunk at `index` as a spare, or destroys it.
  void RetireEmpty(size_t index);
  // Destroys spare chunks until `bytes` more fit under limit_bytes_.
  void DropSparesFor(size_t bytes);

  ibv_pd* const pd_;
  const int access_;
  const size_t chunk_bytes_;
  const size_t limit_bytes_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  uint32_t next_id_ = 1;
  size_t registered_ = 0;
  uint64_t registrations_ = 0;
  size_t in_use_ = 0;
  size_t spare_ = 0;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_LINK_SLAB_H_
