#include "toe_backend/uring_ring.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "vsocket/log.h"

namespace vsocket::toe {
namespace {

constexpr unsigned kRingEntries = 8;  // at most 3 operations per call

std::atomic<uint64_t> g_fork_generation{0};

void CountFork() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

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
    if (io_uring_peek_cqe(ring, &cqe) == 0) {
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

UringSupport Probe() {
  UringSupport s;
  // Newest first; each older kernel rejects a flag it does not know with
  // EINVAL.
  const unsigned kTries[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,  // 6.1
      IORING_SETUP_COOP_TASKRUN,                                // 5.19
      0,
  };
  struct io_uring ring;
  int rc = -EINVAL;
  for (unsigned flags : kTries) {
    rc = io_uring_queue_init(kRingEntries, &ring, flags);
    if (rc == 0) {
      s.setup_flags = flags;
      break;
    }
    if (rc != -EINVAL) break;  // EPERM, ENOSYS, ENOMEM: no io_uring at all
  }
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
  pthread_atfork(nullptr, nullptr, &CountFork);
  return s;
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
  int rc = io_uring_queue_init(kRingEntries, &t.ring, s.setup_flags);
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

int SubmitAndReap(struct io_uring* ring, int count, int32_t* res) {
  int rc;
  do {
    rc = io_uring_submit_and_wait(ring, static_cast<unsigned>(count));
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
    int w = io_uring_wait_cqe(ring, &cqe);
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
