// vsocket's own background threads (the shm liveness watcher, the RDMA
// progress thread) start through here.
#ifndef VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
#define VSOCKET_VSOCKET_BACKGROUND_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace vsocket {

// Runs `body` on a detached thread that blocks every signal, so the
// application's handlers keep running on the application's threads --
// except the synchronous fault signals: a SIGBUS (or SIGSEGV ...) raised by
// this thread's own access while blocked kills the process whatever the
// handler, and the liveness watcher touches the shared segments, whose
// pages a peer can take away (fifo_bridge/segment_fault_guard.h).
template <typename Body>
void StartBackgroundThread(Body body) {
  sigset_t all, old;
  sigfillset(&all);
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, fault);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  std::thread(std::move(body)).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_BACKGROUND_THREAD_H_
