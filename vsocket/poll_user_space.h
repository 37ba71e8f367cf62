// The user-space half of a poll-style wait -- vsocket_poll, and the
// interposer's poll, ppoll, select and pselect (preload/interpose_wait.cc)
// -- for calls whose descriptors include fast-path connections.
//
// One PollUserSpace lives for one call.  Begin() finds, among the caller's
// descriptors, the connected sockets whose transport knows its readiness in
// user space (Transport::PollUserSpace); Spin() then looks at their rings
// without a system call, holding them (no wake-ups from their peers), and
// at the kernel's descriptors only every kKernelEveryNs (or when a
// zero-timeout call finds nothing in the rings), with a non-sleeping
// poll() on a copy whose watched entries are switched off (-1).  A set made only of watched connections makes no system call at
// all until it sleeps.  Whatever user space cannot tell (end of stream,
// errors, POLLNVAL) ends the spin and leaves the call to the kernel, which
// is then exact.
//
// The events reported for a watched connection are POLLIN and POLLOUT as
// asked; POLLHUP, POLLERR, POLLRDHUP and POLLPRI come from the kernel.
//
// Threading: the calling thread only.  Sockets stay referenced for the
// object's life; PrepareSleep() drops them (keeping weak ones to count the
// sleep, see Transport::NoteKernelSleeper) so that a close by another
// thread while this one sleeps is not delayed.
#ifndef VSOCKET_VSOCKET_POLL_USER_SPACE_H_
#define VSOCKET_VSOCKET_POLL_USER_SPACE_H_

#include <poll.h>
#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include "vsocket/signal_restart.h"
#include "vsocket/user_space_holds.h"

namespace vsocket {

class Transport;
class VirtualSocket;

class PollUserSpace {
 public:
  PollUserSpace(const PollUserSpace&) = delete;
  PollUserSpace& operator=(const PollUserSpace&) = delete;

  // At most this many watched connections per call; a call with more
  // watches the first ones and leaves the rest to the kernel's look.
  static constexpr size_t kMaxWatched = 256;
  static constexpr int64_t kKernelEveryNs = 64 * 1000;
  // Once a call spins with nothing ready, the kernel's descriptors are
  // looked at this often: a look then delays no data (the core only
  // waits), and a listener's new connection or a pipe's byte is seen about
  // as soon as a kernel wake-up would have brought it.
  static constexpr int64_t kKernelWhileWaitingNs = 16 * 1000;

  // The non-sleeping kernel look at the other descriptors: poll() with a
  // zero timeout and `sigmask` applied (nullptr: none), as ppoll would.
  using KernelLook = int (*)(struct pollfd* fds, nfds_t nfds,
                             const sigset_t* sigmask);
  explicit PollUserSpace(KernelLook look) : look_(look) {}

  // True when some of fds[0, nfds) are connections user space can watch.
  // Descriptors above `highest` are not looked up (the interposer knows
  // the highest number a virtual socket ever had; INT_MAX: all).  Looks at
  // each watched connection once (its readiness is kept for
  // AnswerFromFirstLook).
  bool Begin(const struct pollfd* fds, nfds_t nfds, int highest);

  // REQUIRES: Begin() returned true.
  // The answer of a busy event loop's typical call, without a poller slot,
  // holds or a kernel look: when Begin's look found a watched connection
  // ready and the call's kernel descriptors (if any) are not due for their
  // look (kKernelEveryNs, checked on every 8th such call), sets every
  // revents as poll() would (the kernel descriptors' 0) and returns the
  // count (>0).  Otherwise returns 0 with *start_ns = MonotonicNs(), and
  // the caller goes on with Spin(..., *start_ns).
  int AnswerFromFirstLook(struct pollfd* fds, nfds_t nfds, int64_t* start_ns) const;

  enum : int { kSleep = -2 };
  // Looks for up to the spin budget (VSOCKET_SPIN_US, at most `timeout_ns`;
  // one look when the call has a zero timeout or gets no PollerSlot).
  // Returns the number of ready entries with every revents of fds set as
  // poll() would (>0), 0 when a zero-timeout call found nothing, -1 with
  // errno (EINTR when a handled signal arrived), or kSleep: nothing within
  // the budget, or the kernel must answer; the caller then calls
  // PrepareSleep(), waits in the kernel for the rest of its timeout, and
  // destroys this object.  `sigmask` is applied during the kernel looks, as
  // ppoll would.  `start_ns` is MonotonicNs() at the caller's entry (the
  // budget counts from there).
  int Spin(struct pollfd* fds, nfds_t nfds, int64_t timeout_ns,
           const sigset_t* sigmask, int64_t start_ns);

  // Gives every hold back and counts this thread as a kernel sleeper of
  // the watched connections until destruction.
  void PrepareSleep();

  // The deliveries seen since construction: the caller's sleep after
  // Spin() is made under SignalsHeldForSleep(signals(), ...), so that a
  // handler run during the spin (or just after it) is the call's EINTR.
  const SignalRestartWindow& signals() const { return signals_; }

 private:
  struct Watched {
    nfds_t index;  // into the caller's fds
    std::shared_ptr<VirtualSocket> socket;
    Transport* transport;
    uint32_t first_look;  // POLLIN/POLLOUT as Begin's look saw them
  };

  KernelLook look_;
  SignalRestartWindow signals_;  // opened with the call
  // A call's lists live in the object (on the caller's stack) while they
  // fit, and spill to the heap past that: a busy loop's calls then make no
  // allocation.  Declared before the lists that use it.
  alignas(std::max_align_t) std::byte arena_[2048];
  std::pmr::monotonic_buffer_resource memory_{arena_, sizeof(arena_)};
  std::pmr::vector<Watched> watched_{&memory_};
  std::pmr::vector<struct pollfd> kernel_fds_{&memory_};  // the caller's, watched ones -1
  bool kernel_part_ = false;               // kernel_fds_ has a descriptor
  KernelSleepers sleepers_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_POLL_USER_SPACE_H_
