// RdmaTransport::Core: the per-connection state RdmaTransport shares with the
// process's RDMA progress thread (rdma_transport.h explains readiness and
// waiting), and CallScope, which ends every application call.  Internal to
// rdma_backend: included by rdma_transport.cc (the socket calls) and
// rdma_transport_zerocopy.cc (the explicit API's zero-copy calls), nothing
// else.
//
// Locking: `mu` serialises every call into `channel` and every change of
// the readiness socket; nobody sleeps holding it (channel calls are made
// with a zero timeout).
#ifndef VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_CORE_H_
#define VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_CORE_H_

#include <errno.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "rdma_backend/link_watch.h"
#include "rdma_backend/progress_thread.h"
#include "rdma_backend/rdma_channel.h"
#include "rdma_backend/rdma_transport.h"
#include "rdma_backend/readiness_socket.h"
#include "vsocket/inplace_view.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {

// Everything the progress thread may touch, kept alive by shared_ptr until
// both the transport and any running progress call let go.
struct RdmaTransport::Core : public ProgressWatcher,
                             public std::enable_shared_from_this<RdmaTransport::Core> {
  std::mutex mu;
  std::unique_ptr<RdmaChannel> channel;  // guarded by mu
  ReadinessSocket ready;                 // guarded by mu
  bool shut_rd = false;                  // guarded by mu
  bool error_reported = false;           // guarded by mu (SO_ERROR taken)
  bool shown_writable = true;            // guarded by mu
  bool watching = false;                 // guarded by mu
  // A connection on its own QP: its completion and CM fds, watched by the
  // progress thread.  Over a link both are -1: the link's are watched once
  // for all its connections (link_watch.h), which calls OnReadable for this
  // slot's events.
  int completion_fd = -1;
  int cm_fd = -1;
  std::shared_ptr<LinkWatch> link_watch;  // over a link
  uint16_t link_slot = 0;
  size_t registered = 0;
  uint64_t fork_generation = 0;          // g_fork_generation at creation
  // Application threads busy-polling the channel right now.  While there
  // are any, the progress thread does not re-arm the CQ (the spinner sees
  // completions first; each re-armed event would cost a thread wake-up on
  // a small machine); a spinner that gives up arms before it sleeps, one
  // that succeeds leaves the arming to LeaveCall.
  std::atomic<int> spinners{0};
  // Deferred arming.  A call whose spin found its completion leaves the CQ
  // unarmed (arming costs a system call, and an armed CQ wakes the progress
  // thread for every later completion).  Before a kernel wait that vsocket
  // sees (the interposer's poll/select/epoll_wait, vsocket_poll),
  // ArmDeferred() arms every such connection; otherwise the progress
  // thread arms it once the connection saw no call for a whole
  // kDeferredArmCheckNs (OnCheck).  A caller that sleeps itself arms first
  // (Sync).
  uint64_t calls = 0;                    // guarded by mu
  uint64_t calls_at_check = 0;           // guarded by mu
  bool check_pending = false;            // guarded by mu; in the deferred list
  // User-space polling (Transport::HoldForUserSpacePoll).  While `held`, a
  // poller looks at the CQ itself (PollUserSpace), so nothing arms the CQ
  // (no progress-thread wake-up per message), and the user descriptor,
  // once raised, is not lowered until the hold ends (no token datagram and
  // drain per message; the interposed epoll takes its EPOLLIN from the
  // poller's look, preload/epoll_set.h).  The hold ends when
  // the poller drops it (before any kernel wait vsocket sees), when a
  // thread is about to sleep in the kernel on the descriptor
  // (`kernel_sleepers`), or when the progress thread's check finds no
  // look or call for a whole kDeferredArmCheckNs (a poller that stopped
  // polling without sleeping where vsocket sees it).
  bool held = false;                     // guarded by mu
  int kernel_sleepers = 0;               // guarded by mu
  // SO_RCVLOWAT: readable (descriptor, PollUserSpace, waits) only with
  // more than this many bytes buffered, or at end of stream or an error.
  // The mark less one, at most half the receive ring (so the peer's
  // credits can reach it); 0 (the default): any byte.
  uint64_t readable_above = 0;           // guarded by mu
  // The explicit API's in-place view of the receive ring
  // (rdma_transport_zerocopy.cc).
  InPlaceView inplace;                   // guarded by mu
  // Held sends (TCP_CORK, MSG_MORE; rdma_channel.h "Held sends"): the
  // progress thread's check that ends a hold once it is due, apart from
  // the deferral's (made on first use; it refers to this Core weakly).
  struct HoldCheck;                      // rdma_transport.cc
  std::shared_ptr<HoldCheck> hold_check;  // guarded by mu
  bool hold_check_pending = false;       // guarded by mu

  // REQUIRES: mu held.  While the channel holds bytes, makes sure the
  // progress thread ends the hold when it is due (or, when no check can be
  // scheduled, posts them now: a hold is never left unbounded).
  void KeepHoldBounded();  // rdma_transport.cc

  // True in a forked child: the verbs objects are the parent's.
  bool Inherited() const;

  // REQUIRES: mu held.  Shows the channel's state on the user descriptor.
  void UpdateReadiness() {
    RdmaChannel& ch = *channel;
    bool broken = ch.error() != 0 || ch.closed();
    bool readable = broken || shut_rd || ch.peer_finished() ||
                    ch.BufferedBytes() > readable_above;
    // Held: a raised descriptor stays raised (lowering is a system call per
    // message; DropHold() lowers it before anyone sleeps on it), so the
    // kernel sees one edge per burst and a poller reads the CQ itself.
    ready.SetReadable(readable || (held && ready.readable()));
    bool writable;
    if (broken || ch.write_shut() || ch.peer_closed()) {
      writable = true;  // a send fails at once: never block on it
    } else {
      uint64_t space = ch.SendSpace();
      writable = shown_writable ? space > 0 : space >= ch.send_capacity() / 4;
    }
    ready.SetWritable(writable);
    shown_writable = writable;
    // As kernel TCP: RDHUP once nothing more can arrive (the peer's FIN or
    // CLOSE, our SHUT_RD, a reset), HUP once neither direction can carry
    // data (both shut, or reset).
    bool rd_done = broken || shut_rd || ch.peer_finished();
    ready.SetHangup(rd_done, broken || (rd_done && ch.write_shut()));
  }

  // REQUIRES: mu held.  After one non-blocking channel attempt of an
  // application call that got `n` (or -1 with `err`): notes a reset as
  // reported, and shows the new state on the descriptor -- arming the CQ
  // too when a non-blocking call is about to return EAGAIN (the caller may
  // sleep in poll/epoll next).
  void AfterAttempt(ssize_t n, int err, bool nonblocking) {
    if (err == ECONNRESET) error_reported = true;
    if (n < 0 && err == EAGAIN && nonblocking && !held) Sync();
    else UpdateReadiness();
  }

  // REQUIRES: mu held.  Arms the CQ so completion_fd() fires for the next
  // completion, handles what is pending, updates readiness.  Stops watching
  // a broken channel (its fds may stay readable; nothing more can happen).
  void Sync() {
    channel->ArmForEvents();
    UpdateReadiness();
    if (watching && (channel->error() != 0 || channel->closed())) {
      if (!link_watch) {
        Unwatch(completion_fd);
        Unwatch(cm_fd);
      }
      watching = false;
    }
  }

  void OnReadable(int fd) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!watching || !channel) return;
    if (fd == cm_fd) channel->PollCm();
    if (held || spinners.load(std::memory_order_acquire) > 0) {
      channel->ConsumeEvents();
      UpdateReadiness();
      return;
    }
    Sync();
  }

  bool OnCheck() override {
    std::lock_guard<std::mutex> lock(mu);
    bool busy = calls != calls_at_check ||
                spinners.load(std::memory_order_acquire) > 0;
    if (watching && channel && busy &&
        (held || !channel->cq_armed() || channel->corked_bytes() > 0)) {
      calls_at_check = calls;  // still busy: look again one period later
      return true;
    }
    if (held) {
      DropHold();  // the poller stopped looking: arms, shows what waits
    } else if (watching && channel && !channel->cq_armed()) {
      Sync();
    }
    if (watching && channel && channel->corked_bytes() > 0) {
      channel->PollNow();  // a burst's tail, its sender gone quiet
      UpdateReadiness();
    }
    EndDeferral();
    return false;
  }

  // REQUIRES: mu held.  Ends a hold: arms the CQ and shows on the user
  // descriptor what arrived meanwhile.
  void DropHold() {
    if (!held) return;
    held = false;
    if (watching && channel) Sync();
  }

  // REQUIRES: mu held.  The end of every application call: makes sure the
  // CQ gets armed before anyone may wait for it outside vsocket (at once
  // when the call had no spin budget, else after an idle period or before
  // the next kernel wait, whichever comes first).
  void LeaveCall(uint32_t spin_ns);  // rdma_transport.cc

  // REQUIRES: mu held.  Leaves the deferred list (the check ran).
  void EndDeferral();  // rdma_transport.cc
  // REQUIRES: mu held.  Makes sure the progress thread checks this
  // connection one kDeferredArmCheckNs from now (lists it for
  // ArmDeferred).  false when no check could be scheduled.
  bool ScheduleDeferral();  // rdma_transport.cc

  // Busy-polls until `ready()` (called under mu, after PollNow) or the
  // budget ends.  Found: returns true with the CQ as it was (LeaveCall arms
  // it later).  Not found: arms the CQ for sleeping and looks once more.
  template <typename Ready>
  bool SpinThenArm(Ready is_ready, uint32_t spin_ns) {
    spinners.fetch_add(1, std::memory_order_acq_rel);
    bool done = SpinUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          channel->PollNow();
          return is_ready();
        },
        [] { return false; }, spin_ns);
    spinners.fetch_sub(1, std::memory_order_acq_rel);
    if (done) return true;
    std::lock_guard<std::mutex> lock(mu);
    Sync();
    return is_ready();
  }
};

// Runs Core::LeaveCall when an application call returns, whichever way.
// Keeps the call's errno: arming makes system calls of its own.
class RdmaTransport::CallScope {
 public:
  CallScope(Core& core, uint32_t spin_ns) : core_(core), spin_ns_(spin_ns) {}
  ~CallScope() {
    int saved_errno = errno;
    {
      std::lock_guard<std::mutex> lock(core_.mu);
      if (core_.channel) core_.LeaveCall(spin_ns_);
    }
    errno = saved_errno;
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  Core& core_;
  uint32_t spin_ns_;
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_TRANSPORT_CORE_H_
