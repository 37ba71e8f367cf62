#include "base/private_fd.h"
#include "base/after_fork.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "base/real_libc.h"

namespace vsocket::sys {
namespace {

std::atomic<unsigned long> g_ranges_closed{0};  // NoteRangeClosed

// Room asked for above the soft limit during a raise.
constexpr rlim_t kAboveRange = rlim_t{1} << 20;  // fs.nr_open's default

// The innermost NofileLimitSnapshot of this thread, or null.
thread_local NofileLimitSnapshot* t_snapshot = nullptr;
thread_local struct rlimit t_snapshot_limit;
thread_local bool t_snapshot_ok = false;

// Held across each raise (setrlimit, F_DUPFD, setrlimit) and each reading
// of the limit, so that no vsocket thread reads another's raised limit.
// Never destroyed: descriptors are made from atexit handlers too.
std::mutex& RaiseMutex() {
  static std::mutex* mutex = new std::mutex();
  return *mutex;
}

// fork() waits for a raise in progress: the child then inherits neither the
// raised limit nor a held lock.  Registered when the library loads, so its
// prepare handler runs after every later-registered one (which may make
// private descriptors) and its child/parent handlers before them.
const bool g_fork_hook = [] {
  ::vsocket::sys::AtFork([] { RaiseMutex().lock(); }, [] { RaiseMutex().unlock(); },
                 [] { RaiseMutex().unlock(); });
  return true;
}();

// RLIMIT_NOFILE as the application set it, never one of our raises.
bool ReadApplicationLimit(struct rlimit* rl) {
  std::lock_guard<std::mutex> lock(RaiseMutex());
  return ::getrlimit(RLIMIT_NOFILE, rl) == 0;
}

// RLIMIT_NOFILE as this thread's snapshot read it, or now.
bool ReadNofileLimit(struct rlimit* rl) {
  if (t_snapshot != nullptr) {
    *rl = t_snapshot_limit;
    return t_snapshot_ok;
  }
  return ReadApplicationLimit(rl);
}

// The lowest private number inside the application's table: half the soft
// limit, at most 1024 (512 with the usual 1024).
long InsideBase(rlim_t soft) {
  if (soft == RLIM_INFINITY || soft >= 2048) return 1024;
  return static_cast<long>(soft / 2);
}

bool RoomAboveSoftLimit(const struct rlimit& rl) {
  return rl.rlim_cur != RLIM_INFINITY &&
         (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur);
}

// Runs `call` (one descriptor call, returning its result with errno) with
// the soft limit raised to `soft`, then puts `rl` back, keeping the call's
// errno.  nullopt (setrlimit's errno) when the raise is refused.
template <typename Call>
std::optional<int> WithSoftLimitRaised(const struct rlimit& rl, rlim_t soft,
                                       Call call) {
  std::lock_guard<std::mutex> lock(RaiseMutex());
  struct rlimit raised = rl;
  raised.rlim_cur = soft;
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return std::nullopt;
  int result = call();
  int saved = errno;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  errno = saved;
  return result;
}

// DupPrivate under the limits `rl` the caller just read.
int DupPrivateUnder(int fd, const struct rlimit& rl) {
  if (RoomAboveSoftLimit(rl)) {
    rlim_t soft = rl.rlim_max == RLIM_INFINITY
                      ? rl.rlim_cur + kAboveRange
                      : std::min(rl.rlim_max, rl.rlim_cur + kAboveRange);
    std::optional<int> copy = WithSoftLimitRaised(rl, soft, [&] {
      return sys::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<long>(rl.rlim_cur));
    });
    // Never fall back into the application's numbers once the room above
    // its limit is used up: that took the numbers it would get next and
    // gave it EMFILE where the kernel would not (10,000 connections under
    // a hard limit of 20,000).  The caller takes TCP (fd_limit).
    if (copy) return *copy;
  }
  return sys::fcntl(fd, F_DUPFD_CLOEXEC, InsideBase(rl.rlim_cur));
}

}  // namespace

NofileLimitSnapshot::NofileLimitSnapshot() : outer_(t_snapshot) {
  if (outer_ == nullptr)
    t_snapshot_ok = ReadApplicationLimit(&t_snapshot_limit);
  t_snapshot = this;
}

NofileLimitSnapshot::~NofileLimitSnapshot() { t_snapshot = outer_; }

int DupPrivate(int fd) {
  struct rlimit rl;
  if (!ReadNofileLimit(&rl)) return sys::fcntl(fd, F_DUPFD_CLOEXEC, 1024);
  return DupPrivateUnder(fd, rl);
}

int MovePrivate(int fd) {
  if (fd < 0) return fd;
  struct rlimit rl;
  if (!ReadNofileLimit(&rl)) return fd;
  // Already where DupPrivate would put it.
  long floor = RoomAboveSoftLimit(rl) ? static_cast<long>(rl.rlim_cur)
                                      : InsideBase(rl.rlim_cur);
  if (fd >= floor) return fd;
  int moved = DupPrivateUnder(fd, rl);
  if (moved < 0) return fd;
  sys::close(fd);
  return moved;
}

int ReplacePrivate(int fd, int private_fd) {
  struct rlimit rl;
  if (!ReadNofileLimit(&rl) || rl.rlim_cur == RLIM_INFINITY ||
      static_cast<rlim_t>(private_fd) < rl.rlim_cur) {
    return sys::dup3(fd, private_fd, O_CLOEXEC) < 0 ? -1 : 0;
  }
  rlim_t soft = static_cast<rlim_t>(private_fd) + 1;
  if (rl.rlim_max != RLIM_INFINITY && soft > rl.rlim_max) {
    errno = EBADF;
    return -1;
  }
  std::optional<int> rc = WithSoftLimitRaised(
      rl, soft, [&] { return sys::dup3(fd, private_fd, O_CLOEXEC); });
  return rc && *rc >= 0 ? 0 : -1;
}

PrivateFdRange CurrentPrivateFdRange() {
  PrivateFdRange range;
  struct rlimit rl;
  if (!ReadNofileLimit(&rl)) return range;
  range.soft_limit =
      rl.rlim_cur == RLIM_INFINITY ? (1L << 20) : static_cast<long>(rl.rlim_cur);
  range.shares_app_table = !RoomAboveSoftLimit(rl);
  if (!range.shares_app_table) {
    rlim_t room = rl.rlim_max == RLIM_INFINITY ? kAboveRange
                                               : std::min(rl.rlim_max - rl.rlim_cur, kAboveRange);
    range.room_above = static_cast<long>(room);
  }
  return range;
}

void NoteRangeClosed() { g_ranges_closed.fetch_add(1, std::memory_order_acq_rel); }

unsigned long RangeClosedCount() {
  return g_ranges_closed.load(std::memory_order_acquire);
}

}  // namespace vsocket::sys
