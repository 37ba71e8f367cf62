// Real signals for the EINTR and SIGPIPE cases, inside one end's process:
// a counting handler and a thread that signals another thread later.
#ifndef VSOCKET_TESTS_CONFORMANCE_SIGNALS_H_
#define VSOCKET_TESTS_CONFORMANCE_SIGNALS_H_

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

namespace conformance {

// How many signals CountSignal() has handled since InstallCounter().
inline std::atomic<int> g_signals_seen{0};

inline void CountSignal(int) { g_signals_seen.fetch_add(1); }

// Installs CountSignal for `sig` with sigaction flags `flags` (0, or
// SA_RESTART) and resets the count.
inline void InstallCounter(int sig, int flags) {
  struct sigaction sa = {};
  sa.sa_handler = CountSignal;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
  g_signals_seen = 0;
}

// A thread that sleeps delay_ms, pthread_kill()s `target` with `sig`, then
// runs `then` (if any).  Join it.
inline std::thread SignalLater(pthread_t target, int sig, int delay_ms,
                               std::function<void()> then = nullptr) {
  return std::thread([=] {
    usleep(static_cast<useconds_t>(delay_ms) * 1000);
    pthread_kill(target, sig);
    if (then) then();
  });
}

}  // namespace conformance

#endif  // VSOCKET_TESTS_CONFORMANCE_SIGNALS_H_
