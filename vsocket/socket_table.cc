#include "vsocket/socket_table.h"
#include "base/after_fork.h"

#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

#include "vsocket/hazard_slots.h"
#include "vsocket/stats.h"

namespace vsocket {
namespace {

class SocketTable {
 public:
  SocketTable() {
    ::vsocket::sys::AtFork(&SocketTable::Prepare, &SocketTable::Parent,
                   &SocketTable::Child);
    StatsInstallExitHook();
  }

  bool MaybeVirtual(int fd) const {
    if (fd < 0) return false;
    if (fd >= kIndexedFds) return true;  // rare: let Lookup decide
    return bitmap_[fd / 64].load(std::memory_order_acquire) &
           (uint64_t{1} << (fd % 64));
  }

  std::shared_ptr<VirtualSocket> Lookup(int fd) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= owners_.size()) return nullptr;
    return owners_[fd];
  }

  // Lock-free: the socket published for `fd`, protected by the hazard slot
  // *slot once the table is seen to still hold it.  nullptr when the cell
  // is empty, or when the caller must ask Lookup (no free slot, a
  // concurrent change, a number past the index).
  VirtualSocket* TryPin(int fd, int* slot) {
    if (fd < 0 || fd >= kIndexedFds) return nullptr;
    std::atomic<VirtualSocket*>* chunk =
        chunks_[fd / kChunkFds].load(std::memory_order_acquire);
    if (!chunk) return nullptr;
    std::atomic<VirtualSocket*>& cell = chunk[fd % kChunkFds];
    VirtualSocket* p = cell.load(std::memory_order_acquire);
    if (!p) return nullptr;
    int s = hazard::Protect(p);
    if (s >= 0 && cell.load(std::memory_order_seq_cst) == p) {
      *slot = s;
      return p;
    }
    if (s >= 0 && hazard::Release(s)) CollectRetired();
    return nullptr;
  }

  void Register(int fd, std::shared_ptr<VirtualSocket> socket) {
    if (fd < 0) return;  // never an index: a caller's bug must not corrupt the table
    // Released after the lock: a stale entry, and retired sockets.
    std::shared_ptr<VirtualSocket> old;
    std::vector<std::shared_ptr<VirtualSocket>> dead;
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (static_cast<size_t>(fd) >= owners_.size()) owners_.resize(fd + 64);
    old = std::move(owners_[fd]);
    Publish(fd, socket.get());
    owners_[fd] = std::move(socket);
    RetireIfPinned(old, &dead);
    if (fd < kIndexedFds)
      bitmap_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
    lock.unlock();
  }

  std::shared_ptr<VirtualSocket> Unregister(int fd) {
    std::vector<std::shared_ptr<VirtualSocket>> dead;  // released after the lock
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= owners_.size()) return nullptr;
    if (fd < kIndexedFds)
      bitmap_[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)), std::memory_order_release);
    Publish(fd, nullptr);
    std::shared_ptr<VirtualSocket> old = std::move(owners_[fd]);
    RetireIfPinned(old, &dead);
    lock.unlock();
    return old;
  }

  // Drops the retired sockets no thread pins any more.  Any thread; takes
  // the table's lock; the sockets are destroyed after it is released.
  void CollectRetired() {
    std::vector<std::shared_ptr<VirtualSocket>> dead;
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      CollectRetiredLocked(&dead);
    }
  }

  static SocketTable& Get() {
    // Never destroyed: sockets may be used from atexit handlers.
    static SocketTable* table = new SocketTable();
    return *table;
  }

 private:
  static constexpr int kIndexedFds = 1 << 20;
  static constexpr int kChunkFds = 4096;

  // REQUIRES: mutex_ held exclusively.
  void Publish(int fd, VirtualSocket* p) {
    if (fd >= kIndexedFds) return;
    std::atomic<VirtualSocket*>* chunk =
        chunks_[fd / kChunkFds].load(std::memory_order_relaxed);
    if (!chunk) {
      if (!p) return;
      // Never freed: a reader may be looking at it without the lock.
      chunk = new std::atomic<VirtualSocket*>[kChunkFds]();
      chunks_[fd / kChunkFds].store(chunk, std::memory_order_release);
    }
    chunk[fd % kChunkFds].exchange(p, std::memory_order_seq_cst);
  }

  // `old` was just unpublished.  If a thread still pins it, the table keeps
  // a reference until that pin ends.  REQUIRES: mutex_ held exclusively;
  // the caller destroys `dead` after releasing it.
  void RetireIfPinned(const std::shared_ptr<VirtualSocket>& old,
                      std::vector<std::shared_ptr<VirtualSocket>>* dead) {
    if (!old || !hazard::IsProtected(old.get())) return;
    retired_.push_back(old);
    hazard::NoteRetired(+1);
    // The pin may have ended before the count was visible to it.
    CollectRetiredLocked(dead);
  }

  // REQUIRES: mutex_ held exclusively.  The caller destroys `dead` after
  // releasing it.
  void CollectRetiredLocked(std::vector<std::shared_ptr<VirtualSocket>>* dead) {
    size_t kept = 0;
    for (auto& s : retired_) {
      if (hazard::IsProtected(s.get())) {
        retired_[kept++] = std::move(s);
      } else {
        dead->push_back(std::move(s));
      }
    }
    retired_.resize(kept);
    if (!dead->empty()) hazard::NoteRetired(-static_cast<int>(dead->size()));
  }

  // Counting the child as a holder must happen before fork() returns in the
  // parent: a parent that closes its copy right away (fork-per-connection
  // servers) would otherwise release the last holder before the child's
  // handler runs, and the peer would see end of stream.  (If fork() fails,
  // the count stays one too high and the connection ends only with the
  // process.)
  static void Prepare() {
    SocketTable& table = Get();
    VirtualSocket::HoldTransportChangesForFork();
    table.mutex_.lock();
    std::unordered_set<VirtualSocket*> seen;
    for (auto& slot : table.owners_) {
      if (slot && seen.insert(slot.get()).second) slot->BeforeFork();
    }
  }
  static void Parent() {
    Get().mutex_.unlock();
    VirtualSocket::ReleaseTransportChangesAfterFork(false);
  }
  static void Child() {
    SocketTable& table = Get();
    // glibc's rwlock remembers the writer's thread id, which differs in the
    // child: start from a fresh, unlocked mutex instead of unlocking.
    new (&table.mutex_) std::shared_mutex();
    VirtualSocket::ReleaseTransportChangesAfterFork(true);
    // The parent's other threads, and their pins, are gone.  Sockets they
    // pinned after a close were never counted for the child (BeforeFork
    // saw only the table), so the child must not release them: keep them.
    hazard::ForgetOtherThreads();
    if (!table.retired_.empty()) {
      hazard::NoteRetired(-static_cast<int>(table.retired_.size()));
      new std::vector<std::shared_ptr<VirtualSocket>>(std::move(table.retired_));
      table.retired_.clear();
    }
    std::unordered_set<VirtualSocket*> seen;
    for (auto& slot : table.owners_) {
      if (slot && seen.insert(slot.get()).second) slot->AfterForkInChild();
    }
  }

  std::shared_mutex mutex_;
  // The owning references, by descriptor number (under mutex_).
  std::vector<std::shared_ptr<VirtualSocket>> owners_;
  // Sockets unregistered while some thread pinned them (under mutex_).
  std::vector<std::shared_ptr<VirtualSocket>> retired_;
  // The same pointers as owners_ for descriptors below kIndexedFds, read
  // without the lock: chunks of kChunkFds cells, made on first use.
  std::atomic<std::atomic<VirtualSocket*>*> chunks_[kIndexedFds / kChunkFds] = {};
  // One bit per descriptor below kIndexedFds: set while registered.
  std::atomic<uint64_t> bitmap_[kIndexedFds / 64] = {};
};

}  // namespace

std::shared_ptr<VirtualSocket> LookupSocket(int fd) {
  return SocketTable::Get().Lookup(fd);
}

void RegisterSocket(int fd, std::shared_ptr<VirtualSocket> socket) {
  SocketTable::Get().Register(fd, std::move(socket));
}

bool MaybeVirtualFd(int fd) { return SocketTable::Get().MaybeVirtual(fd); }

std::shared_ptr<VirtualSocket> UnregisterSocket(int fd) {
  return SocketTable::Get().Unregister(fd);
}

SocketPin PinSocket(int fd) {
  int slot = -1;
  SocketTable& table = SocketTable::Get();
  if (VirtualSocket* found = table.TryPin(fd, &slot)) return SocketPin(found, slot);
  if (!table.MaybeVirtual(fd)) return {};
  // No free slot, a concurrent change, or a number past the index.
  return SocketPin(table.Lookup(fd));
}

SocketPin& SocketPin::operator=(SocketPin&& other) noexcept {
  if (this != &other) {
    Reset();
    socket_ = other.socket_;
    slot_ = other.slot_;
    owned_ = std::move(other.owned_);
    other.socket_ = nullptr;
    other.slot_ = -1;
  }
  return *this;
}

void SocketPin::Reset() {
  if (slot_ >= 0 && hazard::Release(slot_)) SocketTable::Get().CollectRetired();
  slot_ = -1;
  socket_ = nullptr;
  owned_.reset();
}

}  // namespace vsocket
