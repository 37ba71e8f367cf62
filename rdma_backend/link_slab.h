// LinkSlab: one link's registered memory (rdma_backend/README.md "Links",
// Memory).  Chunks are mapped and registered ONCE (ibv_reg_mr) with the
// slab's access flags and carved into equal power-of-two slices: a
// connection's receive ring or send mirror costs no registration of its
// own.  A chunk serves one slice size; a chunk whose slices are all free
// again is deregistered and unmapped.
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

  // A slice of exactly `bytes` (a power of two, >= 64), zeroed.  False with
  // errno EINVAL (size), ENOMEM (the limit, or mmap/ibv_reg_mr refused:
  // RLIMIT_MEMLOCK).
  bool Allocate(size_t bytes, LinkSlice* out);
  // REQUIRES: `slice` came from Allocate() on this slab and is not freed.
  void Free(const LinkSlice& slice);

  size_t registered_bytes() const { return registered_; }
  // ibv_reg_mr calls made so far (tests show slices cost none).
  uint64_t registrations() const { return registrations_; }
  size_t slices_in_use() const { return in_use_; }

 private:
  struct Chunk {
    uint32_t id = 0;
    uint8_t* base = nullptr;
    size_t bytes = 0;
    uint32_t slice = 0;
    ibv_mr* mr = nullptr;
    std::vector<uint32_t> free;  // slice indexes
    uint32_t used = 0;
  };
  Chunk* NewChunk(uint32_t slice);
  void DestroyChunk(size_t index);

  ibv_pd* const pd_;
  const int access_;
  const size_t chunk_bytes_;
  const size_t limit_bytes_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  uint32_t next_id_ = 1;
  size_t registered_ = 0;
  uint64_t registrations_ = 0;
  size_t in_use_ = 0;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_LINK_SLAB_H_
