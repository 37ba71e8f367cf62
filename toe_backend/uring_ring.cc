#include "toe_backend/uring_ring.h"
#include "base/after_fork.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/private_fd.h"
#include "base/real_libc.h"
#include "toe_backend/toe_config.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::toe {
namespace {

constexpr unsigned kRingEntries = 8;  // at most 3 operations per call

// Ring setups, newest first; each older kernel rejects a flag it does not
// know with EINVAL.
constexpr unsigned kPlainSetups[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,  // 6.1
    IORING_SETUP_COOP_TASKRUN,                                // 5.19
    0,
};
// With SQPOLL the kernel refuses COOP_TASKRUN and DEFER_TASKRUN; the SQ
// thread is the single issuer (6.0).
constexpr unsigned kSqpollSetups[] = {
    IORING_SETUP_SQPOLL | IORING_SETUP_SINGLE_ISSUER,
    IORING_SETUP_SQPOLL,
};

std::atomic<uint64_t> g_fork_generation{0};
SqpollCounters g_sqpoll_counters;

// The process image's SQ thread (SQPOLL only).  `fd` is a private,
// close-on-exec duplicate of the descriptor of the image's first SQPOLL
// ring, which every later ring attaches to; it belongs to this file and is
// never closed while the image runs, because the first ring's own thread
// may exit (closing its descriptor) while later threads still need to
// attach.  A forked child inherits the parent's (`generation` tells): the
// kernel lets no other process attach to an SQ thread (EPERM, after which
// it would quietly start one per ring), so the child closes its copy and
// its first ring starts its own.  All fields under `mu`, which is held
// across fork() (pthread_atfork), so a child never inherits it locked.
struct SqThread {
  std::mutex mu;
  int fd = -1;
  uint64_t generation = 0;
  bool started = false;  // this image tried to start one (fd < 0: failed)
};
SqThread g_sq_thread;

void CountFork() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }
void LockSqThread() { g_sq_thread.mu.lock(); }
void UnlockSqThread() { g_sq_thread.mu.unlock(); }
void AfterForkInChild() {
  UnlockSqThread();
  CountFork();
}

// io_uring_queue_init with `flags`; `wq_fd` >= 0 attaches the ring to
// that ring's SQ thread.  0 or -errno.
int InitRing(struct io_uring* ring, unsigned flags, uint32_t idle_ms, int wq_fd) {
  struct io_uring_params p = {};
  p.flags = flags;
  p.sq_thread_idle = idle_ms;
  if (wq_fd >= 0) {
    p.flags |= IORING_SETUP_ATTACH_WQ;
    p.wq_fd = static_cast<__u32>(wq_fd);
  }
  return io_uring_queue_init_params(kRingEntries, ring, &p);
}

// The first of `setups` this kernel accepts (its flags in *chosen), or the
// -errno of the refusal that ended the search (anything but EINVAL ends it:
// EPERM, ENOSYS, ENOMEM).
template <size_t N>
int InitFirstAccepted(struct io_uring* ring, const unsigned (&setups)[N],
                      uint32_t idle_ms, unsigned* chosen) {
  int rc = -EINVAL;
  for (unsigned flags : setups) {
    rc = InitRing(ring, flags, idle_ms, -1);
    if (rc == 0) {
      *chosen = flags;
      return 0;
    }
    if (rc != -EINVAL) break;
  }
  return rc;
}

// Keeps a duplicate of a new SQ thread's first ring as g_sq_thread.fd.
// REQUIRES: g_sq_thread.mu held (or the probe, before any other ring).
void KeepSqThread(int ring_fd) {
  int fd = sys::DupPrivate(ring_fd);
  if (fd < 0) fd = sys::fcntl(ring_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    VSOCKET_LOG(kWarn, "toe: could not keep the SQ thread's ring (%s); later "
                "threads get rings without SQPOLL", std::strerror(errno));
  g_sq_thread.fd = fd;
}

// One thread's ring; torn down when the thread exits.
struct ThreadRing {
  struct io_uring ring;
  bool made = false;
  bool failed = false;
  uint64_t generation = 0;

  // At the exit of a thread, where nothing of the thread's can be
  // interrupted any more.  Not for the main thread, whose destructors run
  // inside exit() before the atexit handlers (which may still make timed
  // blocking calls): the process's end closes its ring.
  ~ThreadRing() {
    if (made && gettid() != getpid()) io_uring_queue_exit(&ring);
  }
};

thread_local ThreadRing t_ring;

// Whether a MSG_DONTWAIT receive on an empty socket completes during the
// submission (-EAGAIN) rather than waiting for data.  Cancels it if not.
// On an SQPOLL ring "during the submission" is "as soon as the SQ thread
// has it": microseconds, so 100 ms is ample.
bool NowaitRecvCompletesAtOnce(struct io_uring* ring) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  char byte;
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  io_uring_prep_recv(sqe, sv[0], &byte, 1, MSG_DONTWAIT);
  sqe->user_data = 1;
  bool at_once = false;
  if (io_uring_submit(ring) == 1) {
    struct io_uring_cqe* cqe = nullptr;
    struct __kernel_timespec sq_thread_answers = {0, 100'000'000};
    int got = (ring->flags & IORING_SETUP_SQPOLL)
                  ? io_uring_wait_cqe_timeout(ring, &cqe, &sq_thread_answers)
                  : io_uring_peek_cqe(ring, &cqe);
    if (got == 0) {
      at_once = cqe->res == -EAGAIN;
      io_uring_cqe_seen(ring, cqe);
    } else {
      // Waiting for data: cancel it, and reap both completions.
      struct io_uring_sqe* cancel = io_uring_get_sqe(ring);
      io_uring_prep_cancel64(cancel, 1, 0);
      cancel->user_data = 2;
      io_uring_submit(ring);
      for (int reaped = 0; reaped < 2;) {
        if (io_uring_wait_cqe(ring, &cqe) != 0) break;
        io_uring_cqe_seen(ring, cqe);
        ++reaped;
      }
    }
  }
  close(sv[0]);
  close(sv[1]);
  return at_once;
}

// SQPOLL as VSOCKET_TOE_SQPOLL asks: true with the ring made (and
// s->sqpoll set), false with s->sqpoll_error set and no ring.
bool ProbeSqpoll(struct io_uring* ring, UringSupport* s) {
  const uint32_t idle_ms = GetToeConfig().sqpoll_idle_ms;
  int rc = InitFirstAccepted(ring, kSqpollSetups, idle_ms, &s->setup_flags);
  if (rc == 0 && !(ring->features & IORING_FEAT_SQPOLL_NONFIXED)) {
    // Before 5.11 SQPOLL works on registered files only.  The ring is left
    // open and unused (its SQ thread asleep): closing it would interrupt
    // this thread's next blocking call (see below).
    rc = -EOPNOTSUPP;
  }
  if (rc != 0) {
    s->setup_flags = 0;
    s->sqpoll_error = -rc;
    VSOCKET_LOG(kWarn, "toe: VSOCKET_TOE_SQPOLL: the kernel refused an SQPOLL "
                "ring (%s); rings are made without it", std::strerror(-rc));
    return false;
  }
  s->sqpoll = true;
  s->sqpoll_idle_ms = idle_ms;
  s->sqpoll_spin_ns = GetToeConfig().sqpoll_spin_us * 1000;
  g_sq_thread.started = true;
  g_sq_thread.generation = g_fork_generation.load(std::memory_order_relaxed);
  KeepSqThread(ring->ring_fd);
  return true;
}

UringSupport Probe() {
  UringSupport s;
  struct io_uring ring;
  int rc = 0;
  if (GetToeConfig().sqpoll_idle_ms == 0 || !ProbeSqpoll(&ring, &s))
    rc = InitFirstAccepted(&ring, kPlainSetups, 0, &s.setup_flags);
  if (rc != 0) {
    s.error = -rc;
    VSOCKET_LOG(kInfo, "toe: io_uring unavailable (%s); toe connections use "
                "plain system calls", std::strerror(-rc));
    return s;
  }
  s.available = true;
  s.defer_taskrun = (s.setup_flags & IORING_SETUP_DEFER_TASKRUN) != 0;
  if (struct io_uring_probe* p = io_uring_get_probe_ring(&ring)) {
    s.send_zc = io_uring_opcode_supported(p, IORING_OP_SEND_ZC);
    io_uring_free_probe(p);
  }
  s.nowait_recv = NowaitRecvCompletesAtOnce(&ring);
  if (!s.nowait_recv)
    VSOCKET_LOG(kInfo, "toe: this kernel's io_uring waits on MSG_DONTWAIT "
                "receives; read-ahead off");
  // The probing thread keeps the ring as its own.  Tearing a ring down
  // queues task work on the thread that made it a few milliseconds later
  // (the kernel's ring exit), which interrupts a blocking socket call of
  // that thread that has a timeout with EINTR: vsocket never closes a
  // ring while the thread that made it runs on.
  ThreadRing& t = t_ring;
  t.ring = ring;
  t.made = true;
  t.generation = g_fork_generation.load(std::memory_order_relaxed);
  if (s.sqpoll) ::vsocket::sys::AtFork(&LockSqThread, &UnlockSqThread, &AfterForkInChild);
  else ::vsocket::sys::AtFork(nullptr, nullptr, &CountFork);
  return s;
}

// The calling thread's ring, when it is not the prober (or is any thread
// of a forked child): as probed, attached to this image's SQ thread, or
// the image's first SQPOLL ring; a plain ring where that cannot be made.
// The ring is the caller's (t_ring); only g_sq_thread is shared.
int MakeThreadRing(struct io_uring* ring, const UringSupport& s, uint64_t generation) {
  if (!s.sqpoll) return io_uring_queue_init(kRingEntries, ring, s.setup_flags);
  int rc;
  {
    std::lock_guard<std::mutex> lock(g_sq_thread.mu);
    if (g_sq_thread.generation != generation) {
      // A forked child: the SQ thread is the parent's.  Dropping our copy
      // of its descriptor leaves the parent's ring alone.
      if (g_sq_thread.fd >= 0) sys::close(g_sq_thread.fd);
      g_sq_thread.fd = -1;
      g_sq_thread.started = false;
      g_sq_thread.generation = generation;
    }
    if (g_sq_thread.fd >= 0) {
      rc = InitRing(ring, s.setup_flags, s.sqpoll_idle_ms, g_sq_thread.fd);
    } else if (!g_sq_thread.started) {
      g_sq_thread.started = true;
      rc = InitRing(ring, s.setup_flags, s.sqpoll_idle_ms, -1);
      if (rc == 0) KeepSqThread(ring->ring_fd);
    } else {
      rc = -EBADF;  // this image's SQ thread could not be started or kept
    }
  }
  if (rc == 0) return 0;
  g_sqpoll_counters.plain_rings.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    VSOCKET_LOG(kWarn, "toe: an SQPOLL ring could not be made (%s); this thread "
                "gets a ring without SQPOLL", std::strerror(-rc));
  unsigned flags = 0;
  return InitFirstAccepted(ring, kPlainSetups, 0, &flags);
}

// SQPOLL, on the calling thread's ring: puts the queued entries where the
// SQ thread looks; an io_uring_enter only when it sleeps (counted).
// Returns what io_uring_submit does.
int SubmitToSqThread(struct io_uring* ring) {
  io_uring_smp_mb();
  if (IO_URING_READ_ONCE(*ring->sq.kflags) & IORING_SQ_NEED_WAKEUP)
    g_sqpoll_counters.wakeups.fetch_add(1, std::memory_order_relaxed);
  return io_uring_submit(ring);
}

// SQPOLL, on the calling thread's ring: the next completion, spun for
// (VSOCKET_TOE_SQPOLL_SPIN_US; pure spinning for the first few
// microseconds, then yielding the core between looks: SpinUntil), then
// slept for in io_uring_enter (counted).
int NextSqpollCqe(struct io_uring* ring, struct io_uring_cqe** cqe) {
  if (SpinUntil([&] { return io_uring_peek_cqe(ring, cqe) == 0; },
                [] { return false; }, ProbeUring().sqpoll_spin_ns))
    return 0;
  g_sqpoll_counters.waits.fetch_add(1, std::memory_order_relaxed);
  return io_uring_wait_cqe(ring, cqe);
}

}  // namespace

const UringSupport& ProbeUring() {
  static const UringSupport support = Probe();
  return support;
}

struct io_uring* ThisThreadRing() {
  ThreadRing& t = t_ring;
  uint64_t generation = g_fork_generation.load(std::memory_order_relaxed);
  if (t.made && t.generation == generation) [[likely]]
    return t.failed ? nullptr : &t.ring;
  if (t.made) {
    // Forked: the ring is the parent's (with SINGLE_ISSUER, the parent's
    // task submits to it).  Drop this image's mapping and descriptor (the
    // parent's keep the ring alive: no ring exit) and make our own.
    io_uring_queue_exit(&t.ring);
    t.made = false;
    t.failed = false;
  }
  if (t.failed) return nullptr;
  const UringSupport& s = ProbeUring();
  if (!s.available) return nullptr;
  if (t.made) return &t.ring;  // this thread just probed: the probe's ring
  int rc = MakeThreadRing(&t.ring, s, generation);
  if (rc != 0) {
    t.failed = true;
    VSOCKET_LOG(kWarn, "toe: this thread's io_uring could not be made (%s); "
                "its calls use plain system calls", std::strerror(-rc));
    return nullptr;
  }
  t.made = true;
  t.generation = generation;
  return &t.ring;
}

const SqpollCounters& GetSqpollCounters() { return g_sqpoll_counters; }

struct io_uring* ThisThreadSqpollRing() {
  if (GetToeConfig().sqpoll_idle_ms == 0 || !ProbeUring().sqpoll) return nullptr;
  struct io_uring* ring = ThisThreadRing();
  return ring && (ring->flags & IORING_SETUP_SQPOLL) ? ring : nullptr;
}

int SubmitAndReap(struct io_uring* ring, int count, int32_t* res) {
  const bool sqpoll = (ring->flags & IORING_SETUP_SQPOLL) != 0;
  int rc;
  do {
    rc = sqpoll ? SubmitToSqThread(ring)
                : io_uring_submit_and_wait(ring, static_cast<unsigned>(count));
  } while (rc == -EINTR);
  if (rc < 0) {
    // Nothing ran, but the entries stay queued and would run with the
    // next submission: this thread's ring is given up (its later calls use
    // plain system calls).  Left open until the thread exits: closing it
    // now would interrupt the thread's next blocking call (see Probe).
    VSOCKET_LOG(kWarn, "toe: io_uring submission failed (%s); this thread "
                "uses plain system calls from now on", std::strerror(-rc));
    ThreadRing& t = t_ring;
    if (t.made && &t.ring == ring) t.failed = true;
    return rc;
  }
  int results = 0;
  int notifications = 0;
  while (results < count || notifications > 0) {
    struct io_uring_cqe* cqe = nullptr;
    int w = sqpoll ? NextSqpollCqe(ring, &cqe) : io_uring_wait_cqe(ring, &cqe);
    if (w == -EINTR) continue;  // the operations are in flight: keep waiting
    if (w < 0) return w;
    uint64_t data = cqe->user_data;
    if (cqe->flags & IORING_CQE_F_NOTIF) {
      --notifications;
    } else {
      int index = static_cast<int>(data & ~kZeroCopyBit);
      if (index >= 0 && index < count) res[index] = cqe->res;
      ++results;
      if ((data & kZeroCopyBit) && (cqe->flags & IORING_CQE_F_MORE)) ++notifications;
    }
    io_uring_cqe_seen(ring, cqe);
  }
  return 0;
}

}  // namespace vsocket::toe
