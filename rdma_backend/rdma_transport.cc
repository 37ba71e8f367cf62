#include "rdma_backend/rdma_transport.h"
#include "base/after_fork.h"

#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "rdma_backend/progress_thread.h"
#include "rdma_backend/rdma_transport_core.h"
#include "rdma_backend/readiness_socket.h"
#include "vsocket/signal_restart.h"
#include "vsocket/iovec_util.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/linger_abort.h"
#include "vsocket/log.h"
#include "base/real_libc.h"
#include "rdma_backend/rdma_provider.h"
#include "rdma_backend/rdma_stats.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {
namespace {

// Connections whose CQ arming is deferred (Core::check_pending), for
// ArmDeferred().  Lock order: a Core's mu, then DeferredList::mu.  A forked
// child starts a new, empty list (another thread may have held the old
// lock at fork; the old entries are the parent's).
struct DeferredList {
  std::mutex mu;
  std::vector<std::weak_ptr<void>> cores;  // guarded by mu
};
DeferredList* g_deferred = new DeferredList();  // leaked: used at exit
std::atomic<int> g_deferred_count{0};           // g_deferred->cores.size()

// How often the progress thread looks at a deferred connection.  Only a
// kernel wait that vsocket does not see (an explicit-API program calling
// libc's poll/epoll itself) depends on it: it sees the next event at most
// two periods late.  Shorter periods cost busy connections: at 200 us the
// progress threads' wake-ups tripled the guest's ping-pong p50.
constexpr int64_t kDeferredArmCheckNs = 2'000'000;

// Incremented in every forked child (pthread_atfork), so a connection can
// tell with one relaxed load whether it was created in this process.
std::atomic<uint64_t> g_fork_generation{0};

void InstallForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    ::vsocket::sys::AtFork(nullptr, nullptr, [] {
      g_fork_generation.fetch_add(1, std::memory_order_relaxed);
      g_deferred = new DeferredList();  // see DeferredList
      g_deferred_count.store(0, std::memory_order_relaxed);
    });
  });
}

}  // namespace

void RdmaTransport::Core::LeaveCall(uint32_t spin_ns) {
  ++calls;
  if (!watching) return;
  // Corked bytes (rdma_channel.h, "Corking") go out with the next call or
  // wait, or at the latest from the check, two periods after the calls
  // stop.
  if (channel->corked_bytes() > 0) {
    if (spin_ns != 0 && ScheduleDeferral()) {
      NoteHeldBackBytes();  // the process's next wait posts them
      return;
    }
    if (!held) {
      Sync();  // arms, and posts them (RdmaChannel::PrepareToSleep)
      return;
    }
    channel->PollNow();  // posts them without arming
    UpdateReadiness();
    return;
  }
  if (held || channel->cq_armed() || check_pending) return;
  if (spin_ns == 0 || !ScheduleDeferral()) Sync();
}

bool RdmaTransport::Core::ScheduleDeferral() {
  if (check_pending) return true;
  if (ScheduleCheck(shared_from_this(), kDeferredArmCheckNs) != 0) return false;
  calls_at_check = calls;
  check_pending = true;
  std::lock_guard<std::mutex> lock(g_deferred->mu);
  g_deferred->cores.push_back(std::static_pointer_cast<void>(shared_from_this()));
  g_deferred_count.store(static_cast<int>(g_deferred->cores.size()),
                         std::memory_order_relaxed);
  return true;
}

void RdmaTransport::Core::EndDeferral() {
  if (!check_pending) return;
  check_pending = false;
  std::lock_guard<std::mutex> lock(g_deferred->mu);
  auto& cores = g_deferred->cores;
  std::erase_if(cores, [this](const std::weak_ptr<void>& w) {
    auto p = w.lock();
    return !p || p.get() == static_cast<void*>(this);
  });
  g_deferred_count.store(static_cast<int>(cores.size()), std::memory_order_relaxed);
}

struct RdmaTransport::Core::HoldCheck : public ProgressWatcher {
  explicit HoldCheck(std::weak_ptr<Core> c) : core(std::move(c)) {}
  void OnReadable(int) override {}  // watches no descriptor
  // Progress thread: posts the hold if it is due, else looks again then.
  // try_lock: a caller inside a call (a close waiting for its disconnect
  // holds the lock for up to its drain bound) must not stall the thread
  // that serves every connection and listener; look again 1 ms later (the
  // check stays pending meanwhile).
  bool OnCheck() override {
    std::shared_ptr<Core> c = core.lock();
    if (!c) return false;
    std::unique_lock<std::mutex> lock(c->mu, std::try_to_lock);
    if (!lock.owns_lock()) {
      // c->hold_check is this object: set once, before it was scheduled.
      if (ScheduleCheck(c->hold_check, kBusyRetryNs) != 0) {
        lock.lock();  // no timer (cannot happen in the owning process)
        c->hold_check_pending = false;
      }
      return false;
    }
    c->hold_check_pending = false;
    if (!c->watching || !c->channel) return false;
    c->channel->ReleaseHeldIfDue(MonotonicNs());
    c->UpdateReadiness();
    c->KeepHoldBounded();  // not due yet, or a new hold began meanwhile
    return false;
  }
  static constexpr int64_t kBusyRetryNs = 1'000'000;
  std::weak_ptr<Core> core;
};

void RdmaTransport::Core::KeepHoldBounded() {
  if (hold_check_pending || channel->held_bytes() == 0) return;
  if (!hold_check) hold_check = std::make_shared<HoldCheck>(weak_from_this());
  // Past the deadline by the thread's allowance for early checks.
  int64_t delay = channel->hold_deadline_ns() - MonotonicNs() + kCheckEarlyNs;
  if (ScheduleCheck(hold_check, std::max<int64_t>(delay, 1)) == 0) {
    hold_check_pending = true;
  } else {
    channel->PushHeld();
  }
}

bool RdmaTransport::Core::Inherited() const {
  return fork_generation != g_fork_generation.load(std::memory_order_relaxed);
}


template <typename Fn>
void RdmaTransport::ForEachDeferred(Fn fn) {
  if (g_deferred_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::shared_ptr<Core>> cores;
  {
    std::lock_guard<std::mutex> lock(g_deferred->mu);
    for (auto& w : g_deferred->cores) {
      if (auto p = w.lock()) cores.push_back(std::static_pointer_cast<Core>(p));
    }
  }
  // try_lock: the caller may already hold one of these locks (a wait that
  // re-entered the interposer under Core::mu would otherwise deadlock on
  // itself).  A connection whose lock is busy is inside a call; its
  // pending check does the job at the latest.
  for (auto& core : cores) {
    if (core->Inherited()) continue;
    std::unique_lock<std::mutex> lock(core->mu, std::try_to_lock);
    if (lock.owns_lock() && core->watching && core->channel) fn(*core);
  }
}

void RdmaTransport::ArmDeferred() {
  // Armed here; the pending check then finds them armed and ends the
  // deferral (it stays listed until then: a later busy call keeps its CQ
  // unarmed again without a new schedule).
  ForEachDeferred([](Core& core) {
    if (core.held) core.DropHold();
    else if (!core.channel->cq_armed()) core.Sync();
  });
}

void RdmaTransport::FlushCorked() {
  ForEachDeferred([](Core& core) {
    if (core.channel->corked_bytes() == 0) return;
    core.channel->PollNow();  // posts them; arms nothing
    core.UpdateReadiness();
  });
}

int RdmaTransport::SleepUntil(short events, int64_t deadline_ns) {
  Core& c = *core_;
  // A sleeper needs the descriptor's readiness: no hold while it sleeps.
  {
    std::lock_guard<std::mutex> lock(c.mu);
    ++c.kernel_sleepers;
    c.DropHold();
  }
  struct SleeperScope {
    Core& c;
    ~SleeperScope() {
      std::lock_guard<std::mutex> lock(c.mu);
      --c.kernel_sleepers;
    }
  } sleeper{c};
  // The channel's own fds too: the caller then handles a completion itself
  // instead of waiting for the progress thread to relay it (one wake-up
  // instead of two in a row).  They are armed: the caller ran Sync().
  struct pollfd fds[3] = {{c.ready.user_fd(), events, 0},
                          {c.completion_fd, POLLIN, 0},
                          {c.cm_fd, POLLIN, 0}};
  // After an SA_RESTART handler the wait resumes (vsocket/signal_restart.h).
  SignalRestartWindow signals;
  int rc;
  do {
    rc = PollUntil(fds, 3, deadline_ns);
  } while (rc < 0 && errno == EINTR && signals.ShouldRestart(deadline_ns >= 0));
  if (rc < 0) return -1;  // EINTR (or EBADF after a concurrent close)
  if (rc == 0) {
    errno = EAGAIN;
    return -1;
  }
  if ((fds[1].revents | fds[2].revents) & POLLIN) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.watching) {
      if (fds[2].revents & POLLIN) c.channel->PollCm();
      c.Sync();
    }
  }
  return 0;
}

namespace {
std::mutex g_live_mu;
}  // namespace

// The registry behind RegisterLive/CloseAllAtExit (leaked: used at exit).
static std::vector<std::weak_ptr<void>>& LiveCores() {
  static auto* cores = new std::vector<std::weak_ptr<void>>();
  return *cores;
}

void RdmaTransport::RegisterLive(const std::shared_ptr<Core>& core) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  auto& cores = LiveCores();
  if (cores.empty()) std::atexit(CloseAllAtExit);
  std::erase_if(cores, [](const std::weak_ptr<void>& w) { return w.expired(); });
  cores.push_back(std::static_pointer_cast<void>(core));
}

void RdmaTransport::CloseAllAtExit() {
  std::vector<std::shared_ptr<Core>> live;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    for (auto& w : LiveCores()) {
      if (auto c = w.lock()) live.push_back(std::static_pointer_cast<Core>(c));
    }
    LiveCores().clear();
  }
  for (auto& core : live) {
    if (core->Inherited()) continue;  // the parent's verbs objects
    std::lock_guard<std::mutex> lock(core->mu);
    if (core->channel) core->channel->Close();  // idempotent, bounded
  }
}

std::unique_ptr<RdmaTransport> RdmaTransport::Create(
    std::unique_ptr<RdmaChannel> channel, std::unique_ptr<ReadinessSocket> ready) {
  InstallForkHandler();
  auto core = std::make_shared<Core>();
  core->fork_generation = g_fork_generation.load(std::memory_order_relaxed);
  core->ready.MoveFrom(*ready);
  const bool on_link = channel->link() != nullptr;
  if (on_link) {
    core->link_watch = LinkWatch::For(channel->link().get());
    core->link_slot = channel->link_slot();
  } else {
    core->completion_fd = channel->completion_fd();
    core->cm_fd = channel->cm_fd();
  }
  core->registered = channel->registered_bytes();
  core->channel = std::move(channel);
  {
    std::lock_guard<std::mutex> lock(core->mu);
    core->Sync();  // data may already be waiting (sent before accept)
  }
  int err = 0;
  if (on_link) {
    if (core->link_watch) core->link_watch->Add(core->link_slot, core);
    else err = -ECONNRESET;  // the link is no longer watched: it died
  } else {
    err = Watch(core->completion_fd, core);
    if (err == 0) {
      err = Watch(core->cm_fd, core);
      if (err != 0) Unwatch(core->completion_fd);
    }
  }
  if (err != 0) {
    VSOCKET_LOG(kWarn, "rdma: cannot watch the channel: %s", strerror(-err));
    core->channel->Abort();  // never paired: the peer must not see a clean EOF
    errno = -err;
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(core->mu);
    core->watching = true;
    core->Sync();
  }
  StatsRdmaRegistered(static_cast<int64_t>(core->registered), core->registered);
  return std::unique_ptr<RdmaTransport>(new RdmaTransport(std::move(core)));
}

int RdmaTransport::TakeOverNumber(int fd) {
  if (!core_ || tcp_fd_ >= 0) return -EINVAL;
  int tcp_fd;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    tcp_fd = core_->ready.TakeNumber(fd);
  }
  if (tcp_fd < 0) {
    VSOCKET_LOG(kWarn, "rdma: cannot give the connection its number %d: %s", fd,
                strerror(-tcp_fd));
    return tcp_fd;
  }
  tcp_fd_ = tcp_fd;
  RegisterLive(core_);
  return 0;
}

bool RdmaTransport::BrokenBeforePairing() {
  if (!core_) return true;
  std::lock_guard<std::mutex> lock(core_->mu);
  core_->channel->PollCm();
  core_->Sync();
  return core_->channel->error() != 0 || core_->channel->closed();
}

RdmaTransport::~RdmaTransport() { Release(); }

int RdmaTransport::user_fd() const { return core_ ? core_->ready.user_fd() : -1; }

size_t RdmaTransport::registered_bytes() const {
  return core_ ? core_->registered : 0;
}

void RdmaTransport::MoveUserFd(int fd) {
  if (!core_) return;
  if (core_->Inherited()) {
    core_->ready.set_user_fd(fd);
    return;
  }
  std::lock_guard<std::mutex> lock(core_->mu);
  core_->ready.set_user_fd(fd);
}

void RdmaTransport::BeforeFork() {
  // Called in the parent just before fork() (the socket layer counts
  // holders there).  Nothing to count: only the creating process can use
  // the connection, and the child recognises its copy by the fork
  // generation (Core::Inherited()).
}

bool RdmaTransport::Usable() const { return core_ && !core_->Inherited(); }

ssize_t RdmaTransport::SendMsg(const struct msghdr* msg, int flags,
                               const IoOptions& io) {
  if (!Usable()) {
    errno = ECONNRESET;
    return -1;
  }
  return StreamSendMsg(*this, msg, flags, io);
}

ssize_t RdmaTransport::RecvMsg(struct msghdr* msg, int flags,
                               const IoOptions& io) {
  if (!Usable()) {
    errno = ECONNRESET;
    return -1;
  }
  return StreamRecvMsg(*this, msg, flags, io);
}

void RdmaTransport::EndCall(StreamCall& call) {
  std::lock_guard<std::mutex> lock(core_->mu);
  if (core_->channel) core_->LeaveCall(call.spin_ns);
}

ssize_t RdmaTransport::TrySend(StreamCall& call, const struct iovec* iov,
                               int iovcnt, size_t skip) {
  Core& c = *core_;
  ssize_t n;
  int err = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (iovcnt == 0) {
      // As TCP: a zero-byte send still reports a broken connection.
      n = 0;
      if (c.channel->error() != 0) {
        n = -1;
        err = c.channel->error();
      } else if (c.channel->write_shut() || c.channel->peer_closed()) {
        n = -1;
        err = EPIPE;
      }
    } else {
      // The caller's array as is on the first pass (no allocation per
      // message); a copy without the bytes already sent after that.
      std::vector<struct iovec> rest;
      if (skip > 0) {
        rest = IovSuffix(iov, static_cast<size_t>(iovcnt), skip);
        iov = rest.data();
        iovcnt = static_cast<int>(rest.size());
      }
      n = c.channel->Send(iov, iovcnt, WaitOptions{0, 0}, call.more);
      if (n < 0) err = errno;
      if (c.channel->held_bytes() != 0) [[unlikely]] c.KeepHoldBounded();
    }
    // A reset already reported: sends fail with EPIPE, as kernel TCP's.
    if (n < 0 && err == ECONNRESET && c.error_reported) err = EPIPE;
    c.AfterAttempt(n, err, call.nonblocking);
  }
  if (n > 0) StatsBytesSent(live_slot(), kRdmaKind, static_cast<uint64_t>(n));
  return n < 0 ? -err : n;
}

ssize_t RdmaTransport::TryRecv(StreamCall& call, const struct iovec* iov,
                               int iovcnt, size_t skip, bool peek) {
  Core& c = *core_;
  ssize_t n;
  int err = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    std::vector<struct iovec> rest;
    if (skip > 0) {  // MSG_WAITALL's later passes only
      rest = IovSuffix(iov, static_cast<size_t>(iovcnt), skip);
      iov = rest.data();
      iovcnt = static_cast<int>(rest.size());
    }
    const bool reset_reported = c.error_reported;
    n = c.channel->TryRecv(iov, iovcnt, peek);
    if (n < 0) err = errno;
    // After shutdown(SHUT_RD), as Linux TCP: bytes that arrived (before or
    // after it) are still read; only nothing to read reads as 0.
    if (n < 0 && err == EAGAIN && c.shut_rd) n = err = 0;
    // A reset is reported once (by a call or SO_ERROR), then the stream
    // reads as ended; a call that has bytes already (MSG_WAITALL's later
    // passes) ends with them and leaves the reset to the next call.
    if (n < 0 && err == ECONNRESET && (reset_reported || skip > 0)) n = err = 0;
    c.AfterAttempt(n, err, call.nonblocking);
  }
  if (n > 0 && !peek) StatsBytesReceived(live_slot(), kRdmaKind, static_cast<uint64_t>(n));
  return n < 0 ? -err : n;
}

// The deadline is read only when the spin found nothing (no clock read on
// a call whose busy-poll succeeds).
int RdmaTransport::WaitWritable(StreamCall& call) {
  if (SpinUntilWritable(call.spin_ns)) return 0;
  return SleepUntil(POLLOUT, call.deadline_ns()) == 0 ? 0 : -errno;
}

int RdmaTransport::WaitReadable(StreamCall& call) {
  if (call.wait_bytes <= 1) [[likely]] {
    if (SpinUntilReadable(call.spin_ns)) return 0;
    return SleepUntil(POLLIN, call.deadline_ns()) == 0 ? 0 : -errno;
  }
  // SO_RCVLOWAT: returns only once the mark's bytes are buffered
  // (call.wait_bytes, no more than the capped mark), or at end of stream,
  // an error, the deadline or a signal, as the stream rules require
  // (vsocket/stream_io.h): bytes that arrive below the mark are left for
  // the call's last look.  A sleep ends at any completion (SleepUntil
  // watches the CQ's channel too), so it looks again and sleeps on.
  uint64_t want;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    want = std::min<uint64_t>(call.wait_bytes, core_->readable_above + 1);
  }
  if (SpinUntilReadable(call.spin_ns, want)) return 0;
  for (;;) {
    if (SleepUntil(POLLIN, call.deadline_ns()) != 0) return -errno;
    if (SpinUntilReadable(0, want)) return 0;  // else armed again
  }
}

void RdmaTransport::CorkChanged(bool on) {
  if (!core_ || core_->Inherited()) return;  // a forked child's copy
  std::lock_guard<std::mutex> lock(core_->mu);
  if (!core_->channel) return;
  core_->channel->SetCork(on);  // out: posts what is held
  core_->UpdateReadiness();
}

void RdmaTransport::PushHeldSends() {
  if (!core_ || core_->Inherited()) return;
  std::lock_guard<std::mutex> lock(core_->mu);
  if (!core_->channel) return;
  core_->channel->PushHeld();
  core_->UpdateReadiness();
}

void RdmaTransport::RecvLowatChanged(uint32_t lowat) {
  if (!core_ || core_->Inherited()) return;
  std::lock_guard<std::mutex> lock(core_->mu);
  if (!core_->channel) return;
  uint64_t reach = std::max<uint64_t>(core_->channel->recv_capacity() / 2, 1);
  core_->readable_above = std::min<uint64_t>(std::max<uint32_t>(lowat, 1), reach) - 1;
  core_->UpdateReadiness();  // a lowered mark may raise it now
}

bool RdmaTransport::SpinUntilWritable(uint32_t spin_ns) {
  Core& c = *core_;
  // Credits arrive as completions: spin on the CQ (then the caller sleeps
  // until the descriptor is writable: the progress thread sees the credit).
  return c.SpinThenArm(
      [&] {
        return c.channel->SendSpace() > 0 || c.channel->error() != 0 ||
               c.channel->peer_closed();
      },
      spin_ns);
}

bool RdmaTransport::SpinUntilReadable(uint32_t spin_ns, uint64_t want) {
  Core& c = *core_;
  return c.SpinThenArm(
      [&] {
        return c.channel->BufferedBytes() >= want || c.channel->peer_finished() ||
               c.channel->error() != 0 || c.shut_rd;
      },
      spin_ns);
}

int RdmaTransport::WaitWritable(uint32_t spin_ns, int64_t deadline_ns) {
  return SpinUntilWritable(spin_ns) ? 0 : SleepUntil(POLLOUT, deadline_ns);
}

int RdmaTransport::WaitReadable(uint32_t spin_ns, int64_t deadline_ns) {
  return SpinUntilReadable(spin_ns) ? 0 : SleepUntil(POLLIN, deadline_ns);
}

int RdmaTransport::Shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  if (!core_ || core_->Inherited()) {
    errno = ENOTCONN;
    return -1;
  }
  Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  int rc = 0;
  if (how != SHUT_WR) c.shut_rd = true;
  if (how != SHUT_RD && !c.channel->write_shut()) {
    if (c.channel->ShutdownWrite() != 0) {
      // As TCP: shutting down a reset connection reports ENOTCONN.
      rc = -1;
      errno = ENOTCONN;
    }
  }
  c.UpdateReadiness();
  return rc;
}

int RdmaTransport::ReadableBytes() {
  if (!core_ || core_->Inherited()) {
    errno = ECONNRESET;
    return -1;
  }
  std::lock_guard<std::mutex> lock(core_->mu);
  int64_t n = core_->channel->ReadableBytes();  // SHUT_RD or not, as TCP
  core_->UpdateReadiness();
  if (n < 0) return -1;
  return n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
}

bool RdmaTransport::DropStaleWakeup() {
  if (!core_ || core_->Inherited()) return false;
  std::lock_guard<std::mutex> lock(core_->mu);
  core_->channel->PollNow();
  // Clears a readable state nothing backs, a hold's included (the caller
  // is about to report the descriptor to the application).
  bool held = core_->held;
  core_->held = false;
  core_->UpdateReadiness();
  core_->held = held;
  return !core_->ready.readable();
}

Transport::UserSpaceReadiness RdmaTransport::PollUserSpace(uint32_t wanted) {
  UserSpaceReadiness r;
  if (!Usable()) return r;
  Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.watching || !c.channel) return r;
  ++c.calls;  // a poller is looking: the progress thread's check waits
  RdmaChannel& ch = *c.channel;
  ch.PollNow();  // the CQ, in user space (posts corked sends first)
  c.UpdateReadiness();  // held: raises at most once per burst
  if (ch.error() != 0 || ch.closed() || c.shut_rd || ch.peer_finished() ||
      ch.write_shut() || ch.peer_closed()) {
    // An end or an error: the descriptor shows it exactly; the kernel says.
    c.DropHold();  // the state is shown already (UpdateReadiness above)
    return r;
  }
  // Beyond SO_RCVLOWAT's mark (readable_above is 0 unless it was set).
  if ((wanted & POLLIN) && ch.BufferedBytes() > c.readable_above) r.events |= POLLIN;
  r.arrivals = ch.ArrivedBytes();
  if (wanted & POLLOUT) {
    // As UpdateReadiness shows it (the same hysteresis).
    uint64_t space = ch.SendSpace();
    if (c.shown_writable ? space > 0 : space >= ch.send_capacity() / 4)
      r.events |= POLLOUT;
  }
  r.exact = true;
  return r;
}

bool RdmaTransport::HoldForUserSpacePoll() {
  if (!Usable()) return false;
  Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.held) return true;
  if (!c.watching || !c.channel || c.kernel_sleepers > 0) return false;
  // The progress thread's check ends a hold nobody looks after.
  if (!c.ScheduleDeferral()) return false;
  c.held = true;
  return true;
}

void RdmaTransport::DropUserSpaceHold() {
  if (!Usable()) return;
  std::lock_guard<std::mutex> lock(core_->mu);
  core_->DropHold();
}

void RdmaTransport::NoteKernelSleeper(bool asleep) {
  if (!Usable()) return;
  std::lock_guard<std::mutex> lock(core_->mu);
  if (asleep) {
    ++core_->kernel_sleepers;
    core_->DropHold();
  } else {
    --core_->kernel_sleepers;
  }
}

int RdmaTransport::TakeError() {
  if (!core_ || core_->Inherited()) return ECONNRESET;
  std::lock_guard<std::mutex> lock(core_->mu);
  core_->channel->PollNow();
  int err = core_->channel->error();
  if (err == 0 || core_->error_reported) return 0;
  core_->error_reported = true;
  return err;
}

void RdmaTransport::Release() {
  if (!core_) return;
  // Never paired (TakeOverNumber): the application never had it, and the
  // peer must not read a clean end of stream.
  const bool unpaired = tcp_fd_ < 0;
  std::shared_ptr<Core> core = std::move(core_);
  if (core->Inherited()) {
    // A forked child's copy: the verbs objects belong to the parent.  Leak
    // the channel object (its destructor would disconnect the parent's
    // connection); close only this process's descriptors.
    (void)core->channel.release();
    if (tcp_fd_ >= 0) sys::close(tcp_fd_);
    tcp_fd_ = -1;
    return;
  }
  bool was_watching;
  {
    std::lock_guard<std::mutex> lock(core->mu);
    was_watching = core->watching;
    core->watching = false;
  }
  if (core->link_watch) {
    core->link_watch->Remove(core->link_slot, core.get());
  } else if (was_watching) {
    Unwatch(core->completion_fd);
    Unwatch(core->cm_fd);
  }
  {
    std::lock_guard<std::mutex> lock(core->mu);
    // As kernel TCP: closing with unread data, or with SO_LINGER {1, 0},
    // resets the connection (the peer reads what arrived, then ECONNRESET)
    // instead of ending it cleanly.
    core->channel->PollNow();
    if (unpaired || (core->channel->BufferedBytes() > 0 && !core->shut_rd) ||
        LingerAbortsClose(tcp_fd_)) {
      core->channel->Abort();
    } else {
      core->channel->Close();  // bounded (ChannelOptions::close_timeout_ns)
    }
    if (unpaired) core->ready.CloseUserEnd();
    core->ready.Close();
  }
  StatsRdmaRegistered(-static_cast<int64_t>(core->registered), core->registered);
  if (tcp_fd_ >= 0) sys::close(tcp_fd_);
  tcp_fd_ = -1;
}

}  // namespace vsocket::rdma
