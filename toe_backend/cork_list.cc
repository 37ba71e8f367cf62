#include "toe_backend/cork_list.h"
#include "base/after_fork.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/real_libc.h"
#include "toe_backend/send_cork.h"
#include "vsocket/background_thread.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::toe {
namespace {

// A closed connection's bytes (AdoptOrphan) and the private duplicate of
// its socket they go out on.  A child forked meanwhile inherits the
// duplicate too, so the FIN also waits for that child's exit or exec, as
// with any socket a child inherits.
struct Orphan {
  int fd = -1;
  std::string bytes;
  size_t sent = 0;
  int64_t last_progress_ns = 0;
};

// Corks that hold bytes, each listed once, and the orphans (all guarded
// by mu).  Allocated once and never freed (exit-time flushes and the
// thread may run after static destructors); a forked child gets a new
// one, because the parent's mutex may have been held at the fork.
struct List {
  std::mutex mu;
  std::condition_variable wake;  // the flusher waits here while empty
  std::vector<std::shared_ptr<SendCork>> corks;
  std::vector<Orphan> orphans;
  std::unordered_set<const SendCork*> listed;  // the corks in `corks`
  ToeEngine* engine = nullptr;          // every toe connection's engine
  bool thread_started = false;
  // The parent's list in a forked child: kept reachable, never used.
  List* before_fork = nullptr;
};

List* g_list = new List();
std::atomic<uint64_t> g_tick{1};
CorkCounters g_counters;

// Takes the listed corks out of the list (the caller re-lists what still
// holds bytes).
std::vector<std::shared_ptr<SendCork>> TakeListed(ToeEngine** engine) {
  std::lock_guard<std::mutex> lock(g_list->mu);
  *engine = g_list->engine;
  g_list->listed.clear();
  return std::move(g_list->corks);
}

void Relist(const std::shared_ptr<SendCork>& cork) {
  std::lock_guard<std::mutex> lock(g_list->mu);
  if (g_list->listed.insert(cork.get()).second) g_list->corks.push_back(cork);
}

// Flushes the listed corks that held bytes before tick `before` (all of
// them for ~0); re-lists the rest and those whose flush left bytes.
void FlushListed(uint64_t before, bool from_thread) {
  ToeEngine* engine = nullptr;
  std::vector<std::shared_ptr<SendCork>> corks = TakeListed(&engine);
  if (corks.empty()) return;
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<SendCork*> flushing;
  std::vector<ToeHandle> handles;
  std::vector<struct iovec> iovs(corks.size());
  std::vector<struct msghdr> msgs(corks.size());
  for (const auto& cork : corks) {
    std::unique_lock<std::mutex> lock(cork->mu(), std::try_to_lock);
    if (!lock.owns_lock()) {
      // Inside a call (or another flusher's): the next wait or tick.
      Relist(cork);
      NoteHeldBackBytes();
      continue;
    }
    if (!cork->holds_bytes()) continue;
    if (cork->held_since_tick() >= before) {
      Relist(cork);
      continue;
    }
    const size_t i = flushing.size();
    if (!cork->PrepareFlush(&iovs[i], &msgs[i])) continue;
    flushing.push_back(cork.get());
    handles.push_back(cork->handle());
    locks.push_back(std::move(lock));
  }
  if (flushing.empty()) return;
  std::vector<ssize_t> results(flushing.size());
  engine->SendBatch(handles.data(), msgs.data(), static_cast<int>(flushing.size()),
                    results.data());
  if (from_thread)
    g_counters.tick_flushes.fetch_add(flushing.size(), std::memory_order_relaxed);
  for (size_t i = 0; i < flushing.size(); ++i) {
    flushing[i]->FinishFlush(results[i]);
    if (flushing[i]->holds_bytes()) {
      Relist(flushing[i]->shared_from_this());
      NoteHeldBackBytes();
    }
  }
}

// Sends what the kernel takes of `o` now.  True when `o` is finished
// (all sent, the connection failed, or no progress for kOrphanMaxMs): its
// descriptor is then closed.
bool SendOrphan(Orphan& o, int64_t now) {
  while (o.sent < o.bytes.size()) {
    ssize_t r = sys::send(o.fd, o.bytes.data() + o.sent, o.bytes.size() - o.sent,
                          MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r > 0) {
      o.sent += static_cast<size_t>(r);
      o.last_progress_ns = now;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
    o.sent = o.bytes.size();  // reset or closed: the kernel drops it too
  }
  if (o.sent < o.bytes.size() && now - o.last_progress_ns < int64_t{kOrphanMaxMs} * 1'000'000)
    return false;
  if (o.sent < o.bytes.size()) {
    VSOCKET_LOG(kWarn, "toe: %zu bytes held for a closed connection not sent: "
                "the peer took nothing for %d s", o.bytes.size() - o.sent,
                kOrphanMaxMs / 1000);
    g_counters.bytes_abandoned.fetch_add(o.bytes.size() - o.sent, std::memory_order_relaxed);
  }
  sys::close(o.fd);
  return true;
}

// The flusher's turn at the orphans: those still waiting go back.
void SendOrphans() {
  std::vector<Orphan> orphans;
  {
    std::lock_guard<std::mutex> lock(g_list->mu);
    orphans.swap(g_list->orphans);
  }
  if (orphans.empty()) return;
  const int64_t now = MonotonicNs();
  std::erase_if(orphans, [now](Orphan& o) { return SendOrphan(o, now); });
  if (orphans.empty()) return;
  std::lock_guard<std::mutex> lock(g_list->mu);
  for (Orphan& o : orphans) g_list->orphans.push_back(std::move(o));
}

void FlusherThread() {
  pthread_setname_np(pthread_self(), "vsocket-toe");
  List* list = g_list;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(list->mu);
      list->wake.wait(lock, [list] {
        return !list->corks.empty() || !list->orphans.empty();
      });
    }
    struct timespec ts = {0, kTickNs};
    nanosleep(&ts, nullptr);
    const uint64_t now = g_tick.fetch_add(1, std::memory_order_relaxed) + 1;
    FlushListed(now - 1, true);
    SendOrphans();
  }
}

void FlushAllAtExit() {
  ToeEngine* engine = nullptr;
  std::vector<std::shared_ptr<SendCork>> corks = TakeListed(&engine);
  (void)engine;
  // One bound for all of them: exit() may wait, but not per connection.
  const int64_t deadline = MonotonicNs() + int64_t{kHandOverWaitMs} * 1'000'000;
  auto left_ms = [deadline] {
    return static_cast<int>(std::max<int64_t>((deadline - MonotonicNs()) / 1'000'000, 0));
  };
  for (const auto& cork : corks) cork->FlushBeforeHandOver(left_ms(), "exit");
  std::vector<Orphan> orphans;
  {
    std::lock_guard<std::mutex> lock(g_list->mu);
    orphans.swap(g_list->orphans);
  }
  for (Orphan& o : orphans) {
    for (;;) {
      // A deadline already passed makes SendOrphan give up on `o`.
      const int64_t now = MonotonicNs();
      if (SendOrphan(o, left_ms() > 0 ? now : now + int64_t{kOrphanMaxMs} * 1'000'000))
        break;
      struct pollfd p = {o.fd, POLLOUT, 0};
      sys::poll(&p, 1, std::max(left_ms(), 1));
    }
  }
}

void InstallHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(FlushAllAtExit);
    ::vsocket::sys::AtFork(nullptr, nullptr, [] {
      List* fresh = new List();
      fresh->before_fork = g_list;
      g_list = fresh;
    });
  });
}

}  // namespace

CorkCounters& GetCorkCounters() { return g_counters; }

uint64_t CurrentTick() { return g_tick.load(std::memory_order_relaxed); }

void ListCorked(const std::shared_ptr<SendCork>& cork, ToeEngine* engine) {
  InstallHandlersOnce();
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(g_list->mu);
    g_list->engine = engine;
    if (g_list->listed.insert(cork.get()).second) {
      g_list->corks.push_back(cork);
      if (g_list->corks.size() == 1) g_list->wake.notify_one();
    }
    if (!g_list->thread_started) start = g_list->thread_started = true;
  }
  if (start) StartBackgroundThread(FlusherThread);
  NoteHeldBackBytes();
}

void FlushAllCorked() { FlushListed(~uint64_t{0}, false); }

void AdoptOrphan(int fd, const char* data, size_t len) {
  InstallHandlersOnce();
  g_counters.orphans.fetch_add(1, std::memory_order_relaxed);
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(g_list->mu);
    Orphan o;
    o.fd = fd;
    o.bytes.assign(data, len);
    o.last_progress_ns = MonotonicNs();
    g_list->orphans.push_back(std::move(o));
    g_list->wake.notify_one();
    if (!g_list->thread_started) start = g_list->thread_started = true;
  }
  if (start) StartBackgroundThread(FlusherThread);
}

}  // namespace vsocket::toe
