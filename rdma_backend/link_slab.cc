#include "rdma_backend/link_slab.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>

namespace vsocket::rdma {
namespace {

// Spare bytes of every slab of the process (kMaxSpareBytes bounds it).
std::atomic<size_t> g_spare_bytes{0};

// Takes `bytes` of the process's spare budget; false if it is spent.
bool TakeSpareBudget(size_t bytes) {
  size_t now = g_spare_bytes.load(std::memory_order_relaxed);
  do {
    if (now + bytes > LinkSlab::kMaxSpareBytes) return false;
  } while (!g_spare_bytes.compare_exchange_weak(now, now + bytes,
                                                std::memory_order_relaxed));
  return true;
}

}  // namespace

LinkSlab::LinkSlab(ibv_pd* pd, int access, size_t chunk_bytes,
                   size_t limit_bytes)
    : pd_(pd), access_(access), chunk_bytes_(chunk_bytes),
      limit_bytes_(limit_bytes) {}

LinkSlab::~LinkSlab() {
  while (!chunks_.empty()) DestroyChunk(chunks_.size() - 1);
}

LinkSlab::Chunk* LinkSlab::NewChunk(uint32_t slice) {
  size_t bytes = slice > chunk_bytes_ ? slice : chunk_bytes_;
  DropSparesFor(bytes);
  if (registered_ + bytes > limit_bytes_) {
    errno = ENOMEM;
    return nullptr;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    errno = ENOMEM;
    return nullptr;
  }
  // A forked child must not share (copy-on-write) pages the NIC writes.
  madvise(base, bytes, MADV_DONTFORK);
  ibv_mr* mr = ibv_reg_mr(pd_, base, bytes, access_);
  if (mr == nullptr) {
    munmap(base, bytes);
    errno = ENOMEM;
    return nullptr;
  }
  ++registrations_;
  registered_ += bytes;
  auto chunk = std::make_unique<Chunk>();
  chunk->id = next_id_++;
  chunk->base = static_cast<uint8_t*>(base);
  chunk->bytes = bytes;
  chunk->slice = slice;
  chunk->mr = mr;
  uint32_t count = static_cast<uint32_t>(bytes / slice);
  chunk->free.reserve(count);
  for (uint32_t i = count; i > 0; --i) chunk->free.push_back(i - 1);
  chunks_.push_back(std::move(chunk));
  return chunks_.back().get();
}

void LinkSlab::DestroyChunk(size_t index) {
  Chunk* c = chunks_[index].get();
  if (c->spare) {
    spare_ -= c->bytes;
    g_spare_bytes.fetch_sub(c->bytes, std::memory_order_relaxed);
  }
  ibv_dereg_mr(c->mr);
  munmap(c->base, c->bytes);
  registered_ -= c->bytes;
  chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
}

void LinkSlab::RetireEmpty(size_t index) {
  Chunk* c = chunks_[index].get();
  for (const auto& other : chunks_) {
    if (other->spare && other->slice == c->slice) {  // one spare per size
      DestroyChunk(index);
      return;
    }
  }
  if (!TakeSpareBudget(c->bytes)) {
    DestroyChunk(index);
    return;
  }
  c->spare = true;
  spare_ += c->bytes;
}

void LinkSlab::DropSparesFor(size_t bytes) {
  for (size_t i = chunks_.size(); i > 0 && registered_ + bytes > limit_bytes_; --i) {
    if (chunks_[i - 1]->spare) DestroyChunk(i - 1);
  }
}

bool LinkSlab::Allocate(size_t bytes, LinkSlice* out) {
  if (bytes < 64 || (bytes & (bytes - 1)) != 0 || bytes > (1ull << 31)) {
    errno = EINVAL;
    return false;
  }
  uint32_t slice = static_cast<uint32_t>(bytes);
  Chunk* chunk = nullptr;
  for (auto& c : chunks_) {
    if (c->slice == slice && !c->free.empty()) {
      chunk = c.get();
      break;
    }
  }
  if (chunk == nullptr && (chunk = NewChunk(slice)) == nullptr) return false;
  if (chunk->spare) {  // in use again
    chunk->spare = false;
    spare_ -= chunk->bytes;
    g_spare_bytes.fetch_sub(chunk->bytes, std::memory_order_relaxed);
  }
  uint32_t index = chunk->free.back();
  chunk->free.pop_back();
  ++chunk->used;
  ++in_use_;
  out->addr = chunk->base + static_cast<size_t>(index) * slice;
  out->size = slice;
  out->lkey = chunk->mr->lkey;
  out->rkey = chunk->mr->rkey;
  out->chunk = chunk->id;
  // Not cleared (the header says why): clearing a 1 MiB ring and its
  // mirror cost more CPU than the rest of a short connection's setup.
  return true;
}

void LinkSlab::Free(const LinkSlice& slice) {
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk* c = chunks_[i].get();
    if (c->id != slice.chunk) continue;
    c->free.push_back(static_cast<uint32_t>((slice.addr - c->base) / c->slice));
    --c->used;
    --in_use_;
    if (c->used == 0) RetireEmpty(i);
    return;
  }
}

}  // namespace vsocket::rdma
