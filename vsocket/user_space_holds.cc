#include "vsocket/user_space_holds.h"
#include "base/after_fork.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include "vsocket/transport.h"
#include "vsocket/virtual_socket.h"

namespace vsocket {
namespace {

struct Holds {
  std::mutex mutex;
  // Keyed by transport: a transport lives as long as its socket does, so a
  // live socket means a live key.
  std::unordered_map<Transport*, std::weak_ptr<VirtualSocket>> by_transport;
};

Holds& H() {
  static Holds* holds = [] {
    auto* h = new Holds();  // never destroyed: used from exit paths
    ::vsocket::sys::AtFork([] { H().mutex.lock(); }, [] { H().mutex.unlock(); },
                   [] { new (&H().mutex) std::mutex(); });
    return h;
  }();
  return *holds;
}

std::atomic<int> g_count{0};
std::atomic<uint64_t> g_epoch{1};

}  // namespace

void NoteUserSpaceHold(const std::shared_ptr<VirtualSocket>& socket,
                       Transport* t) {
  // Listed in this epoch already: nothing to do (the common case).  The
  // caller's hold came before this load, so if the list was emptied after
  // it, that drop saw the hold (seq_cst throughout).
  uint64_t epoch = g_epoch.load(std::memory_order_seq_cst);
  if (t->user_space_hold_epoch.load(std::memory_order_relaxed) == epoch) return;
  Holds& h = H();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.by_transport[t] = socket;
  t->user_space_hold_epoch.store(g_epoch.load(std::memory_order_relaxed),
                                 std::memory_order_relaxed);
  g_count.store(static_cast<int>(h.by_transport.size()),
                std::memory_order_release);
}

void DropAllUserSpaceHolds() {
  if (g_count.load(std::memory_order_acquire) == 0) return;
  std::unordered_map<Transport*, std::weak_ptr<VirtualSocket>> held;
  {
    Holds& h = H();
    std::lock_guard<std::mutex> lock(h.mutex);
    held.swap(h.by_transport);
    g_count.store(0, std::memory_order_relaxed);
    g_epoch.fetch_add(1, std::memory_order_seq_cst);
  }
  for (auto& [t, weak] : held) {
    // A socket gone meanwhile ended its hold in Release().
    if (std::shared_ptr<VirtualSocket> alive = weak.lock()) t->DropUserSpaceHold();
  }
}

Transport* WatchableTransport(VirtualSocket& socket, int fd) {
  if (socket.state() != VirtualSocket::State::kConnected) return nullptr;
  Transport* t = socket.TransportFinishingConnect(fd);
  return t && (t->capabilities() & kCapUserSpaceReadiness) ? t : nullptr;
}

void KernelSleepers::Add(const std::shared_ptr<VirtualSocket>& socket,
                         Transport* t) {
  t->NoteKernelSleeper(true);
  sleepers_.push_back({socket, t});
}

KernelSleepers::~KernelSleepers() {
  for (const Sleeper& s : sleepers_) {
    // A socket closed meanwhile is gone from this process; its count stays
    // in a side state other processes may share, which at worst keeps their
    // pollers from holding it (they get wake-ups: slower, never stuck).
    if (std::shared_ptr<VirtualSocket> alive = s.socket.lock())
      s.transport->NoteKernelSleeper(false);
  }
}

}  // namespace vsocket
