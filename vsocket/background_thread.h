// vsocket's own background threads (the shm liveness watcher, the RDMA
// progress thread) start through here.
#ifndef VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
#define VSOCKET_VSOCKET_BACKGROUND_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace vsocket {

// Runs `body` on a detached thread that blocks every signal, so the
// application's handlers keep running on the application's threads --
// except the synchronous fault signals: a SIGBUS (or SIGSEGV ...) raised by
// this thread's own access while blocked kills the process whatever the
// handler, and the liveness watcher touches the shared segments, whose
// pages a peer can take away (fifo_bridge/segment_fault_guard.h).
//
// Returns once the thread runs `body`: glibc marks a new thread "not yet
// cloned" for setuid()/setgroups() until it has started, and a child made
// by a raw clone() meanwhile (vsftpd forks its sessions so, right after the
// accept that started the liveness watcher) would wait for that thread for
// ever in its first setgroups().
template <typename Body>
void StartBackgroundThread(Body body) {
  sigset_t all, old;
  sigfillset(&all);
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, fault);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  auto started = std::make_shared<std::promise<void>>();
  std::future<void> running = started->get_future();
  std::thread([started, body = std::move(body)]() mutable {
    started->set_value();
    body();
  }).detach();
  running.wait();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
