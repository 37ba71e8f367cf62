#include "preload/epoll_spin.h"

#include <errno.h>

#include <atomic>
#include <cstdint>

#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "vsocket/config.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/signal_restart.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/wait.h"

namespace vsocket::preload {
namespace {

constexpr int kWords = kMaxTrackedEpollFd / 64;
std::atomic<uint64_t> g_marked[kWords];
// Lets close() skip the bitmap while no set was ever marked.
std::atomic<bool> g_any_marked{false};

bool Marked(int epfd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return false;
  return g_marked[epfd / 64].load(std::memory_order_relaxed) &
         (uint64_t{1} << (epfd % 64));
}

}  // namespace

void NoteFastPathInEpollSet(int epfd, int fd) {
  if (epfd < 0 || epfd >= kMaxTrackedEpollFd) return;
  if (GetConfig().spin_us == 0) return;
  auto vs = LookupSocket(fd);
  if (!vs || vs->state() != VirtualSocket::State::kConnected) return;
  Transport* t = vs->TransportFinishingConnect(fd);
  if (!t || !(t->capabilities() & kCapUserSpaceReadiness)) return;
  g_marked[epfd / 64].fetch_or(uint64_t{1} << (epfd % 64),
                               std::memory_order_relaxed);
  g_any_marked.store(true, std::memory_order_relaxed);
}

void ForgetEpollSet(int fd) {
  if (!g_any_marked.load(std::memory_order_relaxed) || !Marked(fd)) return;
  g_marked[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)),
                              std::memory_order_relaxed);
}

int SpinningEpollWait(int epfd, struct epoll_event* events, int maxevents,
                      int64_t timeout_ns, const sigset_t* sigmask,
                      EpollSleep sleep) {
  if (timeout_ns != 0) BeforeKernelWait();
  if (timeout_ns == 0 || !Marked(epfd))
    return sleep(epfd, events, maxevents, timeout_ns, sigmask);
  int64_t start = MonotonicNs();
  int64_t budget = int64_t{GetConfig().spin_us} * 1000;
  if (timeout_ns >= 0 && timeout_ns < budget) budget = timeout_ns;
  int ready = 0;
  // epoll_wait is never restarted after a handler (signal(7)): a delivery
  // during the spin is this call's EINTR, as the kernel's sleep would give.
  SignalRestartWindow signals;
  bool found = SpinUntil(
      [&] {
        ready = real::epoll_pwait(epfd, events, maxevents, 0, sigmask);
        return ready != 0;
      },
      [&] { return signals.AnyDelivery(); }, static_cast<uint32_t>(budget));
  if (found) return ready;
  if (signals.AnyDelivery()) {
    errno = EINTR;
    return -1;
  }
  if (timeout_ns < 0) return sleep(epfd, events, maxevents, -1, sigmask);
  int64_t left = timeout_ns - (MonotonicNs() - start);
  return sleep(epfd, events, maxevents, left < 0 ? 0 : left, sigmask);
}

}  // namespace vsocket::preload
