// vsocket's own background threads (the shm liveness watcher, the RDMA
// progress thread) start through here.
#ifndef VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
#define VSOCKET_VSOCKET_BACKGROUND_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

namespace vsocket {

// Threads StartBackgroundThread created that do not run their body yet.
inline std::atomic<int> g_background_threads_starting{0};

// Runs `body` on a detached thread that blocks every signal, so the
// application's handlers keep running on the application's threads --
// except the synchronous fault signals: a SIGBUS (or SIGSEGV ...) raised by
// this thread's own access while blocked kills the process whatever the
// handler, and the liveness watcher touches the shared segments, whose
// pages a peer can take away (shared memory's segment fault guard).
template <typename Body>
void StartBackgroundThread(Body body) {
  sigset_t all, old;
  sigfillset(&all);
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, fault);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  g_background_threads_starting.fetch_add(1, std::memory_order_acq_rel);
  std::thread([body = std::move(body)]() mutable {
    g_background_threads_starting.fetch_sub(1, std::memory_order_acq_rel);
    body();
  }).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Waits (yielding) until every thread StartBackgroundThread created runs
// its body, at most `max_ms`.  Before a raw clone() (preload/
// interpose_clone.cc): glibc marks a new thread "not yet cloned" for
// setuid()/setgroups() until it has started, and a child made meanwhile
// (vsftpd forks its sessions so, right after the accept that started the
// liveness watcher) would wait for that thread for ever in its first
// setgroups().  Any thread.
inline void WaitForBackgroundThreadsToStart(int max_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  while (g_background_threads_starting.load(std::memory_order_acquire) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
