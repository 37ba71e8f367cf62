#include "fifo_bridge/shm_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/after_fork.h"
#include "base/private_directory.h"
#include "base/process_exited.h"
#include "base/real_libc.h"
#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/segment_fault_guard.h"
#include "fifo_bridge/shm_segment.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;

namespace {

constexpr size_t kPage = 4096;

int64_t MonotonicMs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// A zombie counts as gone: it no longer touches any page.
bool ProcessIsGone(uint32_t pid) { return sys::ProcessExited(static_cast<pid_t>(pid)); }

// Decimal without leading zeros (or "0" alone when `zero_ok`), at most
// `max`.  Consumes digits up to the first non-digit.
bool TakeDecimal(std::string_view* text, uint64_t max, bool zero_ok, uint64_t* out) {
  size_t n = 0;
  uint64_t value = 0;
  while (n < text->size() && (*text)[n] >= '0' && (*text)[n] <= '9') {
    if (n >= 20) return false;
    uint64_t digit = static_cast<uint64_t>((*text)[n] - '0');
    if (value > (max - digit) / 10) return false;
    value = value * 10 + digit;
    ++n;
  }
  if (n == 0 || (n > 1 && (*text)[0] == '0') || (!zero_ok && value == 0)) return false;
  text->remove_prefix(n);
  *out = value;
  return true;
}

bool TakeChar(std::string_view* text, char c) {
  if (text->empty() || (*text)[0] != c) return false;
  text->remove_prefix(1);
  return true;
}

// ---- The fault guard's table of pool mappings (async-signal-safe) ----

constexpr int kGuardSlots = 256;
struct GuardSlot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> lost{false};
};
GuardSlot g_guard[kGuardSlots];

int RegisterForGuard(uintptr_t start, uintptr_t end) {
  for (int i = 0; i < kGuardSlots; ++i) {
    uintptr_t expected = 0;
    if (g_guard[i].start.compare_exchange_strong(expected, start)) {
      g_guard[i].lost.store(false, std::memory_order_relaxed);
      g_guard[i].end.store(end, std::memory_order_release);
      return i;
    }
  }
  return -1;  // not found by address: never marked lost (the faults still reset)
}

}  // namespace

std::string ShmDirectory(uid_t euid) { return "/dev/shm/vsocket-" + std::to_string(euid); }

size_t PoolSliceBytes(uint64_t capacity) { return SegmentBytes(capacity); }

size_t PoolBytes(uint64_t capacity) {
  size_t slice = PoolSliceBytes(capacity);
  size_t slices = std::min<size_t>(kPoolSlices, std::max<size_t>(1, kPoolAddressBytes / slice));
  return slices * slice;
}

bool ParsePoolName(std::string_view name, uint32_t* owner_pid, uint64_t* capacity) {
  std::string_view text = name;
  uint64_t pid = 0, cap = 0;
  if (text.substr(0, 5) != "pool-") return false;
  text.remove_prefix(5);
  if (!TakeDecimal(&text, 0x7fffffff, false, &pid) || !TakeChar(&text, '-')) return false;
  if (text.size() < 17) return false;
  for (size_t i = 0; i < 16; ++i) {
    char c = text[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  text.remove_prefix(16);
  if (!TakeChar(&text, '-') || !TakeDecimal(&text, uint64_t{1} << 40, false, &cap) ||
      !text.empty() || !IsValidCapacity(cap)) {
    return false;
  }
  *owner_pid = static_cast<uint32_t>(pid);
  *capacity = cap;
  return true;
}

bool ParsePoolOfferTarget(std::string_view text, PoolOfferTarget* out) {
  size_t hash = text.find('#');
  if (hash == std::string_view::npos || hash > 128) return false;
  PoolOfferTarget target;
  std::string_view pool = text.substr(0, hash);
  if (!ParsePoolName(pool, &target.owner_pid, &target.capacity)) return false;
  text.remove_prefix(hash + 1);
  uint64_t slice = 0, generation = 0;
  if (!TakeDecimal(&text, kPoolSlices - 1, true, &slice) || !TakeChar(&text, '#') ||
      !TakeDecimal(&text, UINT32_MAX, true, &generation) || !text.empty()) {
    return false;
  }
  target.pool.assign(pool);
  target.slice = static_cast<uint32_t>(slice);
  target.generation = static_cast<uint32_t>(generation);
  *out = std::move(target);
  return true;
}

std::string FormatPoolOfferTarget(const std::string& pool, uint32_t slice,
                                  uint32_t generation) {
  return pool + "#" + std::to_string(slice) + "#" + std::to_string(generation);
}

// ---- Mappings ----

// Maps pool files for both sides.
class PoolMaps {
 public:
  // Maps `fd` (a checked pool file of `bytes`) as `name`.
  static int Map(int fd, const std::string& path, const std::string& name, uint32_t owner_pid,
                 uint64_t capacity, size_t bytes, const struct stat& st,
                 std::shared_ptr<PoolMapping>* out) {
    InstallSegmentFaultGuard();  // a lost page is a reset, not a SIGBUS
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return -errno;
    std::shared_ptr<PoolMapping> m(new PoolMapping());
    m->name_ = name;
    m->path_ = path;
    m->base_ = static_cast<uint8_t*>(base);
    m->bytes_ = bytes;
    m->capacity_ = capacity;
    m->slice_bytes_ = PoolSliceBytes(capacity);
    m->slices_ = static_cast<uint32_t>(bytes / m->slice_bytes_);
    m->owner_pid_ = owner_pid;
    m->dev_ = st.st_dev;
    m->ino_ = st.st_ino;
    auto start = reinterpret_cast<uintptr_t>(base);
    m->registry_slot_ = RegisterForGuard(start, start + bytes);
    *out = std::move(m);
    return 0;
  }
};

PoolMapping::~PoolMapping() {
  if (registry_slot_ >= 0) {
    g_guard[registry_slot_].end.store(0, std::memory_order_relaxed);
    g_guard[registry_slot_].start.store(0, std::memory_order_release);
  }
  if (base_) ::munmap(base_, bytes_);
}

bool PoolMapping::lost() const {
  return registry_slot_ >= 0 && g_guard[registry_slot_].lost.load(std::memory_order_acquire);
}

// ---- The client's pools ----

namespace {

// Incremented in each forked child: pools made before belong to the parent.
std::atomic<uint64_t> g_fork_epoch{0};

}  // namespace

// One pool this process made: its free list and chunk table.
class ClientPool {
 public:
  std::mutex mu;
  std::shared_ptr<PoolMapping> mapping;
  uint64_t epoch = 0;
  uint32_t carved = 0;                // slices [0, carved) handed out once
  std::vector<uint32_t> free_slices;  // ready for reuse
  std::vector<uint32_t> generation;   // per carved slice
  std::vector<bool> punched;          // ring pages given back
  struct Pending {
    uint32_t slice;
    int64_t since_ms;
  };
  std::vector<Pending> pending;  // returned; the peer may still use them

  // The slice's peer has let go of it for good.
  bool Reusable(const Pending& p, int64_t now_ms) {
    auto* header = reinterpret_cast<SegmentHeader*>(mapping->slice_base(p.slice));
    uint32_t released = header->released.load(std::memory_order_acquire);
    uint32_t claim = header->claim.load(std::memory_order_acquire);
    bool quarantined = now_ms - p.since_ms < 1000;
    // Never claimed (revoked, declined, withdrawn): a server may still be
    // between its look and its CAS; the CAS fails on kRevoked and the
    // generation guards a later reuse, so a second is plenty.
    if (!ClaimWasMade(claim)) return !quarantined;
    if (!(released & kClientReleased)) return false;  // a forked child holds it
    if (released & kServerDetached) return true;
    // Claimed by a server that died before letting go.
    return !quarantined && ProcessIsGone(header->server_pid);
  }

  // REQUIRES: mu held.  Reuse first (the slices' pages are there
  // already; a scan of the returned slices, a few atomic loads each), then
  // the free list, then a new chunk.  Taking cold free slices while warm
  // ones wait in `pending` punched a slice per connection.
  bool Take(uint32_t* slice) {
    if (!pending.empty()) {
      int64_t now_ms = MonotonicMs();
      for (size_t i = 0; i < pending.size();) {
        if (Reusable(pending[i], now_ms)) {
          Free(pending[i].slice);
          pending[i] = pending.back();
          pending.pop_back();
        } else {
          ++i;
        }
      }
    }
    if (free_slices.empty() && carved < mapping->slices()) {
      uint32_t chunk = std::min(kPoolChunkSlices, mapping->slices() - carved);
      struct statvfs vfs;
      // Room for the slice handed out now: a chunk costs nothing until
      // its pages are used, and a full /dev/shm is the fault guard's.
      uint64_t want = mapping->slice_bytes();
      if (::statvfs(mapping->path().c_str(), &vfs) == 0 && vfs.f_blocks != 0 &&
          vfs.f_frsize != 0 &&
          vfs.f_bavail < (want + vfs.f_frsize - 1) / vfs.f_frsize) {
        return false;  // /dev/shm has no room
      }
      for (uint32_t i = carved + chunk; i > carved; --i) free_slices.push_back(i - 1);
      carved += chunk;
      generation.resize(carved, 0);
      punched.resize(carved, true);  // nothing there to punch yet
    }
    if (free_slices.empty()) return false;
    *slice = free_slices.back();
    free_slices.pop_back();
    punched[*slice] = false;  // the new connection will touch its pages
    return true;
  }

  // REQUIRES: mu held.  The free list is a stack: the slices on top are
  // reused first, so theirs are the pages kept; a slice that falls below
  // the warm window has its ring pages punched out.
  void Free(uint32_t slice) {
    free_slices.push_back(slice);
    size_t warm = std::min<size_t>(
        kPoolWarmSlices, std::max<size_t>(1, kPoolWarmBytes / mapping->slice_bytes()));
    if (free_slices.size() <= warm) return;
    uint32_t cold = free_slices[free_slices.size() - 1 - warm];
    if (punched[cold]) return;
    // MADV_REMOVE on a shared tmpfs mapping punches the file's pages out
    // (as fallocate(PUNCH_HOLE) would), with no descriptor kept per pool.
    uint8_t* at = mapping->slice_base(cold) + kSegmentHeaderBytes;
    if (::madvise(at, mapping->slice_bytes() - kSegmentHeaderBytes, MADV_REMOVE) == 0) {
      punched[cold] = true;
    }
  }
};

namespace {

struct ClientPools {
  std::mutex mu;
  std::vector<ClientPool*> pools;  // never freed: slices point at them
};

ClientPools* g_client_pools = nullptr;
uint64_t g_client_pools_epoch = 0;
std::mutex g_client_pools_mu;  // re-made in each forked child

void OnForkChild() {
  g_fork_epoch.fetch_add(1, std::memory_order_relaxed);
  new (&g_client_pools_mu) std::mutex();
}

ClientPools* ThisProcessPools() {
  static bool registered = (sys::AtFork(nullptr, nullptr, OnForkChild), true);
  (void)registered;
  std::lock_guard<std::mutex> lock(g_client_pools_mu);
  uint64_t epoch = g_fork_epoch.load(std::memory_order_relaxed);
  if (g_client_pools == nullptr || g_client_pools_epoch != epoch) {
    // A forked child leaves its parent's pools (and their locks) alone.
    g_client_pools = new ClientPools();
    g_client_pools_epoch = epoch;
  }
  return g_client_pools;
}

uint64_t RandomNonce() {
  uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce)) {
    struct timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    nonce = (static_cast<uint64_t>(ts.tv_nsec) << 20) ^ static_cast<uint64_t>(ts.tv_sec) ^
            (static_cast<uint64_t>(::getpid()) << 40) ^ reinterpret_cast<uintptr_t>(&nonce);
  }
  return nonce;
}

// The name `path` still names the file `mapping` maps: unlink it.
void UnlinkIfSameFile(const std::string& path, const PoolMapping& mapping) {
  struct stat st;
  if (!path.empty() && ::lstat(path.c_str(), &st) == 0 && st.st_dev == mapping.dev() &&
      st.st_ino == mapping.ino()) {
    ::unlink(path.c_str());
  }
}

void UnlinkOwnPoolsAtExit();

// Once per process image, with its first own pool (made or adopted across
// exec).
void UnlinkOwnPoolsAtExitOnce() {
  static bool registered = std::atexit(UnlinkOwnPoolsAtExit) == 0;
  (void)registered;
}

// Makes a new pool file and maps it.
int NewClientPool(uid_t euid, uint64_t capacity, ClientPool** out) {
  std::string dir = ShmDirectory(euid);
  if (int err = sys::EnsurePrivateDirectory(dir, euid)) return err;
  size_t bytes = PoolBytes(capacity);
  uint32_t pid = static_cast<uint32_t>(::getpid());
  for (int attempt = 0; attempt < 4; ++attempt) {
    char nonce[17];
    std::snprintf(nonce, sizeof(nonce), "%016llx",
                  static_cast<unsigned long long>(RandomNonce()));
    std::string name = "pool-" + std::to_string(pid) + "-" + nonce + "-" +
                       std::to_string(capacity);
    std::string path = dir + "/" + name;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return -errno;
    struct stat st;
    std::shared_ptr<PoolMapping> mapping;
    int err = 0;
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fstat(fd, &st) != 0) {
      err = -errno;
    } else {
      err = PoolMaps::Map(fd, path, name, pid, capacity, bytes, st, &mapping);
    }
    if (err != 0) {
      sys::close(fd);
      ::unlink(path.c_str());
      return err;
    }
    UnlinkOwnPoolsAtExitOnce();
    sys::close(fd);  // the mapping and the name suffice (no descriptor per pool)
    auto* pool = new ClientPool();
    pool->mapping = std::move(mapping);
    pool->epoch = g_fork_epoch.load(std::memory_order_relaxed);
    *out = pool;
    return 0;
  }
  return -EEXIST;
}

}  // namespace

int AcquirePoolSlice(uid_t euid, uint64_t capacity, PoolSlice* out) {
  if (!IsValidCapacity(capacity)) return -EINVAL;
  ClientPools* all = ThisProcessPools();
  std::lock_guard<std::mutex> lock(all->mu);
  ClientPool* pool = nullptr;
  uint32_t slice = 0;
  for (ClientPool* candidate : all->pools) {
    if (candidate->mapping->capacity() != capacity || candidate->mapping->lost()) continue;
    std::lock_guard<std::mutex> pool_lock(candidate->mu);
    if (candidate->Take(&slice)) {
      pool = candidate;
      break;
    }
  }
  if (pool == nullptr) {
    if (int err = NewClientPool(euid, capacity, &pool)) return err;
    all->pools.push_back(pool);
    std::lock_guard<std::mutex> pool_lock(pool->mu);
    if (!pool->Take(&slice)) return -ENOSPC;
  }
  uint32_t generation;
  {
    std::lock_guard<std::mutex> pool_lock(pool->mu);
    generation = ++pool->generation[slice];
  }
  // A reused slice holds the last connection's header, side states and
  // ring indices: zero them (the ring data needs no clearing).
  uint8_t* base = pool->mapping->slice_base(slice);
  std::memset(base, 0, kSegmentHeaderBytes);
  size_t stride = (pool->mapping->slice_bytes() - kSegmentHeaderBytes) / 2;
  for (size_t ring = 0; ring < 2; ++ring)
    std::memset(base + kSegmentHeaderBytes + ring * stride, 0, kRingDataOffset);
  out->mapping = pool->mapping;
  out->owner = pool;
  out->slice = slice;
  out->generation = generation;
  return 0;
}

void ReturnPoolSlice(const PoolSlice& slice) {
  ClientPool* pool = slice.owner;
  if (pool == nullptr || pool->epoch != g_fork_epoch.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(pool->mu);
  pool->pending.push_back({slice.slice, MonotonicMs()});
}

// ---- The server's cache of peers' pools ----

namespace {

constexpr int64_t kIdlePoolMs = 10'000;
constexpr int64_t kCacheLookEveryMs = 1'000;

struct PeerPools {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<PoolMapping>> by_name;
  std::unordered_map<std::string, int64_t> idle_since_ms;
  int64_t next_look_ms = 0;
};

PeerPools* g_peer_pools = nullptr;

// A forked child may have inherited the lock held by another thread.
void RemakePeerPoolsLock() {
  if (g_peer_pools != nullptr) new (&g_peer_pools->mu) std::mutex();
}

// In a forked child, once fork() has returned: the cached mappings no
// slice uses go.  A pre-forking server's session process would otherwise
// carry every pool its listener had cached, and programs lower RLIMIT_AS
// there (vsftpd: 200 MiB, which a few 64 MiB pools filled, and its next
// thread's stack failed).
void DropUnusedPoolsInForkedChild() {
  if (g_peer_pools == nullptr) return;
  std::lock_guard<std::mutex> lock(g_peer_pools->mu);
  for (auto it = g_peer_pools->by_name.begin(); it != g_peer_pools->by_name.end();) {
    if (it->second.use_count() == 1) {
      g_peer_pools->idle_since_ms.erase(it->first);
      it = g_peer_pools->by_name.erase(it);
    } else {
      ++it;
    }
  }
}

PeerPools& ThePeerPools() {
  static PeerPools* pools = [] {
    g_peer_pools = new PeerPools();
    sys::AtFork(nullptr, nullptr, RemakePeerPoolsLock);
    sys::RunInEachForkedChild(DropUnusedPoolsInForkedChild);
    return g_peer_pools;
  }();
  return *pools;
}

// REQUIRES: pools.mu held.  Drops the mappings no slice uses whose owner
// is gone, or that have been idle for kIdlePoolMs.  Returns whether unused
// mappings remain.
bool DropUnusedPools(PeerPools& pools, int64_t now_ms, bool now = false) {
  if (!now && now_ms < pools.next_look_ms) return true;
  pools.next_look_ms = now_ms + kCacheLookEveryMs;
  bool unused_left = false;
  for (auto it = pools.by_name.begin(); it != pools.by_name.end();) {
    bool unused = it->second.use_count() == 1;
    if (!unused) {
      pools.idle_since_ms.erase(it->first);
      ++it;
      continue;
    }
    auto [idle, fresh] = pools.idle_since_ms.emplace(it->first, now_ms);
    if (it->second->lost() || ProcessIsGone(it->second->owner_pid()) ||
        now_ms - idle->second >= kIdlePoolMs) {
      pools.idle_since_ms.erase(idle);
      it = pools.by_name.erase(it);
    } else {
      unused_left = true;
      ++it;
    }
  }
  return unused_left;
}

}  // namespace

int MapPeerPool(const std::string& name, uid_t euid, std::shared_ptr<PoolMapping>* out) {
  uint32_t owner_pid = 0;
  uint64_t capacity = 0;
  if (!ParsePoolName(name, &owner_pid, &capacity)) return -EINVAL;
  PeerPools& pools = ThePeerPools();
  std::lock_guard<std::mutex> lock(pools.mu);
  DropUnusedPools(pools, MonotonicMs());
  auto it = pools.by_name.find(name);
  if (it != pools.by_name.end() && !it->second->lost()) {
    *out = it->second;
    return 0;
  }
  // The client's own pool (a connection to ourselves) is mapped again:
  // the server's view is independent of the owner's.
  std::string path = ShmDirectory(euid) + "/" + name;
  int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = -errno;
  } else if (!S_ISREG(st.st_mode) || st.st_uid != euid || (st.st_mode & 077) != 0) {
    err = -EPERM;
  } else if (st.st_size <= 0 || static_cast<uint64_t>(st.st_size) % PoolSliceBytes(capacity) != 0 ||
             static_cast<uint64_t>(st.st_size) / PoolSliceBytes(capacity) > kPoolSlices) {
    err = -EINVAL;
  } else {
    std::shared_ptr<PoolMapping> mapping;
    err = PoolMaps::Map(fd, path, name, owner_pid, capacity, static_cast<size_t>(st.st_size),
                        st, &mapping);
    if (err == 0) {
      if (owner_pid == static_cast<uint32_t>(::getpid())) UnlinkOwnPoolsAtExitOnce();
      pools.by_name[name] = mapping;
      pools.idle_since_ms.erase(name);
      *out = std::move(mapping);
    }
  }
  sys::close(fd);
  return err;
}

namespace {

// The atexit handler (UnlinkOwnPoolsAtExitOnce): this image's pool files
// go with it, as a file per offer went at the release of its connection,
// rather than at another process's sweep.  A pool with a slice handed out
// and not yet claimed keeps its file (its server has not mapped the pool
// yet; the sweep removes it once this pid is gone).  Servers keep their
// mappings.  Locks are only tried: a thread that holds one at exit leaves
// its pools to the sweep.  Not run on _exit, a fatal signal or exec (the
// new image adopts the pool by name).
void UnlinkOwnPoolsAtExit() {
  uint64_t epoch = g_fork_epoch.load(std::memory_order_relaxed);
  {
    std::unique_lock<std::mutex> lock(g_client_pools_mu, std::try_to_lock);
    ClientPools* all = lock.owns_lock() && g_client_pools_epoch == epoch ? g_client_pools
                                                                         : nullptr;
    std::unique_lock<std::mutex> all_lock;
    if (all) all_lock = std::unique_lock<std::mutex>(all->mu, std::try_to_lock);
    if (all && all_lock.owns_lock()) {
      for (ClientPool* pool : all->pools) {
        std::unique_lock<std::mutex> pool_lock(pool->mu, std::try_to_lock);
        if (!pool_lock.owns_lock() || pool->epoch != epoch) continue;
        std::vector<bool> in_use(pool->carved, true);
        for (uint32_t s : pool->free_slices) in_use[s] = false;
        for (const auto& p : pool->pending) in_use[p.slice] = false;
        bool unclaimed = false;
        for (uint32_t s = 0; s < pool->carved && !unclaimed; ++s) {
          auto* header = reinterpret_cast<SegmentHeader*>(pool->mapping->slice_base(s));
          unclaimed = in_use[s] && !ClaimWasMade(header->claim.load(std::memory_order_acquire));
        }
        if (!unclaimed) UnlinkIfSameFile(pool->mapping->path(), *pool->mapping);
      }
    }
  }
  if (g_peer_pools == nullptr) return;
  std::unique_lock<std::mutex> lock(g_peer_pools->mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (auto& [name, mapping] : g_peer_pools->by_name) {
    // Adopted across exec: ours.
    if (mapping->owner_pid() == static_cast<uint32_t>(::getpid()))
      UnlinkIfSameFile(mapping->path(), *mapping);
  }
}

}  // namespace

bool DropUnusedPeerPools() {
  PeerPools& pools = ThePeerPools();
  std::lock_guard<std::mutex> lock(pools.mu);
  return DropUnusedPools(pools, MonotonicMs(), /*now=*/true);
}

void ReleasePeerPoolSlice(PoolSlice* slice) {
  std::shared_ptr<PoolMapping> mapping = std::move(slice->mapping);
  if (!mapping || !mapping->owner_may_have_exited()) return;
  {
    PeerPools& pools = ThePeerPools();
    std::lock_guard<std::mutex> lock(pools.mu);
    auto it = pools.by_name.find(mapping->name());
    // Ours and the cache's: no other slice of it is in use.
    if (it == pools.by_name.end() || it->second != mapping || mapping.use_count() != 2) return;
    if (!ProcessIsGone(mapping->owner_pid())) return;
    pools.by_name.erase(it);
    pools.idle_since_ms.erase(mapping->name());
  }
  // Nobody maps it for a new connection: its owner made the offers.  The
  // name is unlinked only while it is this file.
  UnlinkIfSameFile(mapping->path(), *mapping);
  mapping.reset();  // the munmap, outside the cache's lock
}

// ---- Fault recovery ----

bool RecoverPoolMapping(const SharedFileMapping& m) {
  const char* slash = std::strrchr(m.path, '/');
  const char* name = slash ? slash + 1 : m.path;
  uint32_t owner_pid = 0;
  uint64_t capacity = 0;
  // The path may end in " (deleted)": the name is what precedes it.
  std::string_view text(name);
  size_t space = text.find(' ');
  if (space != std::string_view::npos) text = text.substr(0, space);
  if (!ParsePoolName(text, &owner_pid, &capacity)) return false;
  const size_t slice_bytes = PoolSliceBytes(capacity);
  const size_t stride = (slice_bytes - kSegmentHeaderBytes) / 2;
  static std::atomic<bool> said{false};
  static const char kMessage[] =
      "vsocket: warn: a shared-memory pool lost its pages (truncated by the peer, or "
      "/dev/shm full); every connection of that pool is reset\n";
  // Each slice overlapping the line [m.start, m.end), which maps the file
  // from m.offset: its rings become zero pages with RESET set; its header
  // page stays shared while it is there (it holds the side states, whose
  // locks forked processes may wait on), else becomes a zero page too.
  const uint64_t first = m.offset / slice_bytes;
  const uint64_t last = (m.offset + (m.end - m.start) + slice_bytes - 1) / slice_bytes;
  bool replaced = false;
  for (uint64_t s = first; s < last; ++s) {
    uint64_t slice_off = s * slice_bytes;
    auto at = [&](uint64_t file_off) -> uintptr_t { return m.start + (file_off - m.offset); };
    auto clip = [&](uint64_t from, uint64_t to, SharedFileMapping* range) {
      uint64_t lo = std::max<uint64_t>(from, m.offset);
      uint64_t hi = std::min<uint64_t>(to, m.offset + (m.end - m.start));
      if (lo >= hi) return false;
      *range = m;
      range->start = at(lo);
      range->end = at(hi);
      return true;
    };
    SharedFileMapping range;
    bool header_here = slice_off >= m.offset &&
                       slice_off + kSegmentHeaderBytes <= m.offset + (m.end - m.start);
    if (clip(slice_off, slice_off + kSegmentHeaderBytes, &range)) {
      char probe = 0;
      struct iovec local = {&probe, 1}, remote = {reinterpret_cast<void*>(range.start), 1};
      bool intact = ::syscall(SYS_process_vm_readv, ::syscall(SYS_getpid), &local, 1UL,
                              &remote, 1UL, 0UL) == 1;
      if (!intact) {
        if (!ReplaceWithZeroPages(range, &said, kMessage)) return replaced;
        replaced = true;
        if (header_here) {
          reinterpret_cast<SegmentHeader*>(range.start)
              ->claim.store(kClaimed, std::memory_order_relaxed);
        }
      }
    }
    if (clip(slice_off + kSegmentHeaderBytes, slice_off + slice_bytes, &range)) {
      if (!ReplaceWithZeroPages(range, &said, kMessage)) return replaced;
      replaced = true;
      for (size_t ring = 0; ring < 2; ++ring) {
        uint64_t control = slice_off + kSegmentHeaderBytes + ring * stride;
        if (control >= m.offset && control + kPage <= m.offset + (m.end - m.start)) {
          reinterpret_cast<RingControl*>(at(control))
              ->flags.store(kReset | kPagesLost, std::memory_order_release);
        }
      }
    }
  }
  for (auto& slot : g_guard) {
    uintptr_t start = slot.start.load(std::memory_order_acquire);
    if (start != 0 && start <= m.start && m.start < slot.end.load(std::memory_order_relaxed))
      slot.lost.store(true, std::memory_order_release);
  }
  return replaced;
}

}  // namespace vsocket::fifo
