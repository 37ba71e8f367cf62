#include "rdma_backend/memory_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace vsocket::rdma {
namespace {

constexpr size_t kPage = 4096;

size_t ArenaBytesFromEnv() {
  size_t mb = 32;
  if (const char* v = std::getenv("VSOCKET_RDMA_POOL_MB")) {
    char* end = nullptr;
    unsigned long parsed = std::strtoul(v, &end, 10);
    if (end != v && *end == '\0' && parsed >= 1 && parsed <= 4096) mb = parsed;
  }
  return mb << 20;
}

std::mutex g_pools_mu;
std::vector<MemoryPool*>* g_pools = nullptr;  // leaked on purpose

}  // namespace

MemoryPool* MemoryPool::ForDevice(ibv_context* ctx, std::string* error) {
  std::lock_guard<std::mutex> lock(g_pools_mu);
  if (g_pools == nullptr) g_pools = new std::vector<MemoryPool*>();
  for (MemoryPool* p : *g_pools) {
    if (p->ctx_ == ctx) return p;
  }
  std::unique_ptr<MemoryPool> pool(new MemoryPool(ctx));
  if (!pool->Init(ArenaBytesFromEnv(), error)) return nullptr;
  g_pools->push_back(pool.get());
  return pool.release();
}

bool MemoryPool::Init(size_t arena_bytes, std::string* error) {
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) {
    int e = errno ? errno : ENOMEM;
    *error = std::string("ibv_alloc_pd: ") + std::strerror(e);
    errno = e;
    return false;
  }
  ring_limit_ = arena_bytes;
  if (!InitArena(&bounce_, arena_bytes, IBV_ACCESS_LOCAL_WRITE, error)) {
    int e = errno;
    for (Arena* a : {&bounce_}) {
      if (a->mr != nullptr) ibv_dereg_mr(a->mr);
      if (a->base != nullptr) munmap(a->base, a->size);
    }
    ibv_dealloc_pd(pd_);
    pd_ = nullptr;
    errno = e;
    return false;
  }
  return true;
}

bool MemoryPool::InitArena(Arena* arena, size_t bytes, int access,
                           std::string* error) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    *error = std::string("mmap pool arena: ") + std::strerror(e);
    errno = e;
    return false;
  }
  arena->base = static_cast<uint8_t*>(p);
  arena->size = bytes;
  arena->mr = ibv_reg_mr(pd_, p, bytes, access);
  if (arena->mr == nullptr) {
    int e = errno ? errno : ENOMEM;
    *error = std::string("ibv_reg_mr pool arena (") +
             std::to_string(bytes >> 20) + " MiB): " + std::strerror(e) +
             (e == ENOMEM || e == EPERM ? " (check ulimit -l)" : "");
    errno = e;
    return false;
  }
  arena->free[0] = bytes;
  return true;
}

PoolBlock MemoryPool::Allocate(ArenaKind kind, size_t bytes) {
  PoolBlock block;
  if (bytes == 0) {
    errno = EINVAL;
    return block;
  }
  size_t want = (bytes + kPage - 1) / kPage * kPage;
  if (kind == ArenaKind::kRing) return AllocateRing(want);
  std::lock_guard<std::mutex> lock(mu_);
  Arena& a = bounce_;
  for (auto it = a.free.begin(); it != a.free.end(); ++it) {
    if (it->second < want) continue;
    size_t off = it->first;
    size_t len = it->second;
    a.free.erase(it);
    if (len > want) a.free[off + want] = len - want;
    a.in_use += want;
    block.addr = a.base + off;
    block.size = want;
    block.lkey = a.mr->lkey;
    block.rkey = a.mr->rkey;
    block.kind = kind;
    return block;
  }
  errno = ENOMEM;
  return block;
}

PoolBlock MemoryPool::AllocateRing(size_t bytes) {
  PoolBlock block;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ring_in_use_ + bytes > ring_limit_) {
      errno = ENOMEM;
      return block;
    }
    ring_in_use_ += bytes;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ibv_mr* mr = nullptr;
  if (p != MAP_FAILED) {
    mr = ibv_reg_mr(pd_, p, bytes,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  }
  if (mr == nullptr) {
    int e = errno ? errno : ENOMEM;
    if (p != MAP_FAILED) munmap(p, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    ring_in_use_ -= bytes;
    errno = e;
    return block;
  }
  block.addr = static_cast<uint8_t*>(p);
  block.size = bytes;
  block.lkey = mr->lkey;
  block.rkey = mr->rkey;
  block.kind = ArenaKind::kRing;
  block.mr = mr;
  return block;
}

void MemoryPool::Free(const PoolBlock& block) {
  if (block.addr == nullptr) return;
  if (block.kind == ArenaKind::kRing) {
    ibv_dereg_mr(block.mr);  // the peer's rkey dies with it
    munmap(block.addr, block.size);
    std::lock_guard<std::mutex> lock(mu_);
    ring_in_use_ -= block.size;
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Arena& a = bounce_;
  size_t off = static_cast<size_t>(block.addr - a.base);
  size_t len = block.size;
  a.in_use -= len;
  auto next = a.free.lower_bound(off);
  if (next != a.free.end() && off + len == next->first) {
    len += next->second;
    next = a.free.erase(next);
  }
  if (next != a.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += len;
      return;
    }
  }
  a.free[off] = len;
}

size_t MemoryPool::InUse(ArenaKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return kind == ArenaKind::kRing ? ring_in_use_ : bounce_.in_use;
}

}  // namespace vsocket::rdma
