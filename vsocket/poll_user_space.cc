#include "vsocket/poll_user_space.h"

#include <errno.h>
#include <time.h>

#include "vsocket/config.h"
#include "vsocket/poller_slots.h"
#include "vsocket/signal_restart.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport.h"
#include "vsocket/user_space_holds.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/wait.h"

namespace vsocket {
namespace {

// When this thread last looked at the kernel's part of a call: a thread
// whose watched connections are always ready still looks every
// kKernelEveryNs, so they never starve a pipe or a kernel socket.
thread_local int64_t t_last_kernel_look_ns = 0;
// First-look answers given while the call had kernel descriptors
// (AnswerFromFirstLook), counting towards the next clock read.
thread_local uint32_t t_answers_without_clock = 0;

uint32_t Wanted(short events) {
  uint32_t wanted = 0;
  if (events & (POLLIN | POLLRDNORM)) wanted |= POLLIN;
  if (events & (POLLOUT | POLLWRNORM)) wanted |= POLLOUT;
  return wanted;
}

short Revents(short events, uint32_t ready) {
  short revents = 0;
  if (ready & POLLIN) revents |= events & (POLLIN | POLLRDNORM);
  if (ready & POLLOUT) revents |= events & (POLLOUT | POLLWRNORM);
  return revents;
}

}  // namespace


bool PollUserSpace::Begin(const struct pollfd* fds, nfds_t nfds, int highest) {
  for (nfds_t i = 0; i < nfds; ++i) {
    int fd = fds[i].fd;
    if (fd < 0 || fd > highest || !MaybeVirtualFd(fd)) continue;
    uint32_t wanted = Wanted(fds[i].events);
    if (!wanted) continue;
    std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
    Transport* t = vs ? WatchableTransport(*vs, fd) : nullptr;
    if (!t) continue;
    // A connection whose state only the kernel can tell makes the whole
    // call the kernel's: it is exact, and it answers at once.
    Transport::UserSpaceReadiness r = t->PollUserSpace(wanted);
    if (!r.exact) return false;
    if (watched_.size() == kMaxWatched) break;
    if (watched_.empty()) watched_.reserve(nfds - i < kMaxWatched ? nfds - i : kMaxWatched);
    watched_.push_back({i, std::move(vs), t, r.events});
  }
  if (watched_.empty()) return false;
  kernel_fds_.assign(fds, fds + nfds);
  for (const Watched& w : watched_) kernel_fds_[w.index].fd = -1;
  for (const struct pollfd& p : kernel_fds_) kernel_part_ |= p.fd >= 0;
  return true;
}

int PollUserSpace::AnswerFromFirstLook(struct pollfd* fds, nfds_t nfds,
                                       int64_t* start_ns) const {
  int ready = 0;
  for (const Watched& w : watched_)
    if (Revents(fds[w.index].events, w.first_look)) ++ready;
  // With kernel descriptors, the clock is read on every 8th such answer
  // only (a look is due after kKernelEveryNs and at most 8 answers more,
  // as libvma's VMA_SELECT_POLL_OS_RATIO counts calls).
  int64_t now = 0;
  if (ready > 0 && kernel_part_ && (++t_answers_without_clock & 7) == 0) {
    now = MonotonicNs();
    if (now - t_last_kernel_look_ns >= kKernelEveryNs) ready = 0;  // Spin looks
  }
  if (ready == 0) {
    *start_ns = now != 0 ? now : MonotonicNs();
    return 0;
  }
  // Every entry that is not watched is either negative or not due.
  for (nfds_t i = 0; i < nfds; ++i) fds[i].revents = 0;
  for (const Watched& w : watched_)
    fds[w.index].revents = Revents(fds[w.index].events, w.first_look);
  return ready;
}

int PollUserSpace::Spin(struct pollfd* fds, nfds_t nfds, int64_t timeout_ns,
                        const sigset_t* sigmask, int64_t start_ns) {
  int64_t budget_ns = int64_t{GetConfig().spin_us} * 1000;
  if (timeout_ns >= 0 && timeout_ns < budget_ns) budget_ns = timeout_ns;
  PollerSlot slot;
  if (!slot.taken()) budget_ns = 0;
  for (const Watched& w : watched_) {
    if ((fds[w.index].events & (POLLIN | POLLRDNORM)) &&
        w.transport->HoldForUserSpacePoll()) {
      NoteUserSpaceHold(w.socket, w.transport);
    }
  }
  PollerPacer pace(start_ns, budget_ns);
  for (;;) {
    int64_t now = pace.now();
    int ready = 0;
    for (const Watched& w : watched_) {
      short events = fds[w.index].events;
      Transport::UserSpaceReadiness r = w.transport->PollUserSpace(Wanted(events));
      if (!r.exact) return kSleep;  // the kernel answers (at once)
      short revents = Revents(events, r.events);
      fds[w.index].revents = revents;
      if (revents) ++ready;
    }
    // A one-look call whose rings show nothing looks at the kernel too;
    // otherwise the kernel's part waits for its turn, which comes sooner
    // while nothing is ready.
    bool kernel_due =
        kernel_part_ &&
        ((timeout_ns == 0 && ready == 0) ||
         now - t_last_kernel_look_ns >=
             (ready == 0 ? kKernelWhileWaitingNs : kKernelEveryNs));
    if (kernel_due) {
      int got = look_(kernel_fds_.data(), nfds, sigmask);
      if (got < 0) return -1;
      t_last_kernel_look_ns = now;
      for (nfds_t i = 0; i < nfds; ++i) {
        if (kernel_fds_[i].fd < 0) continue;
        fds[i].revents = kernel_fds_[i].revents;
      }
      ready += got;
    } else if (ready > 0) {
      for (nfds_t i = 0; i < nfds; ++i)
        if (kernel_fds_[i].fd >= 0) fds[i].revents = 0;
    }
    if (ready > 0) return ready;
    if (timeout_ns == 0) {
      for (nfds_t i = 0; i < nfds; ++i) fds[i].revents = 0;
      return 0;
    }
    if (signals_.AnyDelivery()) {
      errno = EINTR;
      return -1;
    }
    if (budget_ns == 0 || !pace.Next()) return kSleep;
  }
}

void PollUserSpace::PrepareSleep() {
  for (const Watched& w : watched_) {
    if (kernel_fds_[w.index].events & (POLLIN | POLLRDNORM))
      sleepers_.Add(w.socket, w.transport);
  }
  watched_.clear();
}

}  // namespace vsocket
