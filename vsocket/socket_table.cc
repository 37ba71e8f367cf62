#include "vsocket/socket_table.h"

#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <new>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

#include "vsocket/stats.h"

namespace vsocket {
namespace {

class SocketTable {
 public:
  SocketTable() {
    pthread_atfork(&SocketTable::Prepare, &SocketTable::Parent,
                   &SocketTable::Child);
    StatsInstallExitHook();
  }

  bool MaybeVirtual(int fd) const {
    if (fd < 0) return false;
    if (fd >= kBitmapFds) return true;  // rare: let Lookup decide
    return bitmap_[fd / 64].load(std::memory_order_acquire) &
           (uint64_t{1} << (fd % 64));
  }

  std::shared_ptr<VirtualSocket> Lookup(int fd) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= slots_.size()) return nullptr;
    return slots_[fd];
  }

  void Register(int fd, std::shared_ptr<VirtualSocket> socket) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(fd + 64);
    slots_[fd] = std::move(socket);
    if (fd < kBitmapFds)
      bitmap_[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_release);
  }

  std::shared_ptr<VirtualSocket> Unregister(int fd) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= slots_.size()) return nullptr;
    if (fd < kBitmapFds)
      bitmap_[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)), std::memory_order_release);
    return std::move(slots_[fd]);
  }

  static SocketTable& Get() {
    // Never destroyed: sockets may be used from atexit handlers.
    static SocketTable* table = new SocketTable();
    return *table;
  }

 private:
  // Counting the child as a holder must happen before fork() returns in the
  // parent: a parent that closes its copy right away (fork-per-connection
  // servers) would otherwise release the last holder before the child's
  // handler runs, and the peer would see end of stream.  (If fork() fails,
  // the count stays one too high and the connection ends only with the
  // process.)
  static void Prepare() {
    SocketTable& table = Get();
    table.mutex_.lock();
    std::unordered_set<VirtualSocket*> seen;
    for (auto& slot : table.slots_) {
      if (slot && seen.insert(slot.get()).second) slot->BeforeFork();
    }
  }
  static void Parent() { Get().mutex_.unlock(); }
  static void Child() {
    SocketTable& table = Get();
    // glibc's rwlock remembers the writer's thread id, which differs in the
    // child: start from a fresh, unlocked mutex instead of unlocking.
    new (&table.mutex_) std::shared_mutex();
    std::unordered_set<VirtualSocket*> seen;
    for (auto& slot : table.slots_) {
      if (slot && seen.insert(slot.get()).second) slot->AfterForkInChild();
    }
  }

  static constexpr int kBitmapFds = 1 << 20;
  std::shared_mutex mutex_;
  std::vector<std::shared_ptr<VirtualSocket>> slots_;
  // One bit per descriptor below kBitmapFds: set while registered.
  std::atomic<uint64_t> bitmap_[kBitmapFds / 64] = {};
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

}  // namespace vsocket
