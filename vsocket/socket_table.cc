#include "vsocket/socket_table.h"

#include <pthread.h>
#include <sys/resource.h>

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

  std::shared_ptr<VirtualSocket> Lookup(int fd) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= slots_.size()) return nullptr;
    return slots_[fd];
  }

  void Register(int fd, std::shared_ptr<VirtualSocket> socket) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(fd + 64);
    slots_[fd] = std::move(socket);
  }

  std::shared_ptr<VirtualSocket> Unregister(int fd) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (fd < 0 || static_cast<size_t>(fd) >= slots_.size()) return nullptr;
    return std::move(slots_[fd]);
  }

  static SocketTable& Get() {
    // Never destroyed: sockets may be used from atexit handlers.
    static SocketTable* table = new SocketTable();
    return *table;
  }

 private:
  static void Prepare() { Get().mutex_.lock(); }
  static void Parent() { Get().mutex_.unlock(); }
  static void Child() {
    SocketTable& table = Get();
    std::unordered_set<VirtualSocket*> seen;
    for (auto& slot : table.slots_) {
      if (slot && seen.insert(slot.get()).second) slot->OnForkChild();
    }
    // glibc's rwlock remembers the writer's thread id, which differs in the
    // child: start from a fresh, unlocked mutex instead of unlocking.
    new (&table.mutex_) std::shared_mutex();
  }

  std::shared_mutex mutex_;
  std::vector<std::shared_ptr<VirtualSocket>> slots_;
};

}  // namespace

std::shared_ptr<VirtualSocket> LookupSocket(int fd) {
  return SocketTable::Get().Lookup(fd);
}

void RegisterSocket(int fd, std::shared_ptr<VirtualSocket> socket) {
  SocketTable::Get().Register(fd, std::move(socket));
}

std::shared_ptr<VirtualSocket> UnregisterSocket(int fd) {
  return SocketTable::Get().Unregister(fd);
}

}  // namespace vsocket
