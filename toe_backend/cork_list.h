// The process's toe connections that hold corked sends (send_cork.h), and
// the one thread that flushes what a quiet sender left behind.
//
// A cork that starts holding bytes lists itself (ListCorked).  Its bytes
// leave at the latest when:
//  - the process waits (FlushAllCorked, from the toe provider's
//    FlushHeldBack: vsocket/kernel_wait.h), every listed connection in
//    one io_uring_enter per 8 (ToeEngine::SendBatch);
//  - the flusher thread ("vsocket-toe") ticks every kTickNs while any
//    cork is listed, and flushes those that held bytes before the
//    previous tick: a tail waits at most two ticks;
//  - exit(): an atexit handler flushes every listed cork (bounded wait).
// A connection closed while the kernel could not take its held bytes yet
// (a slow reader) is not waited for: close() hands the bytes and a private
// duplicate of the socket to the flusher thread (AdoptOrphan), which sends
// them as room appears and then closes the duplicate, so the peer's FIN
// follows them, as the kernel sends an orphaned socket's buffer.  It gives
// up after kOrphanMaxMs without progress (counted, with a warning).
// Nothing runs while no cork is listed and no orphan waits: the thread
// sleeps on a condition variable.
//
// Threading: any thread.  Lock order: a cork's mu, then the list's mutex
// (ListCorked is called under the cork's); the flushers take corks' locks
// with try_lock, so a connection inside a call is skipped and re-listed.
// After fork() the child starts with an empty list and no thread (its
// inherited corks are replaced: ToeTransport::AfterForkInChild).
#ifndef VSOCKET_TOE_BACKEND_CORK_LIST_H_
#define VSOCKET_TOE_BACKEND_CORK_LIST_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "toe_backend/toe_engine.h"

namespace vsocket::toe {

class SendCork;

inline constexpr int64_t kTickNs = 1'000'000;
// How long a hand-over (close, shutdown, fork, exec) waits for the kernel
// to take held bytes, and exit() for all of them together.
inline constexpr int kHandOverWaitMs = 2000;
inline constexpr int kOrphanMaxMs = 60000;

// What corking did, process-wide, for the toe_engine stats.  Relaxed.
struct CorkCounters {
  std::atomic<uint64_t> corked_sends{0};    // sends taken into a cork
  std::atomic<uint64_t> flushes{0};         // sendmsg calls or SQEs that carried held bytes
  std::atomic<uint64_t> tick_flushes{0};    // flushes made by the flusher thread
  std::atomic<uint64_t> bytes_abandoned{0}; // held bytes a hand-over could not send
  std::atomic<uint64_t> orphans{0};         // closes that left bytes to the thread
};
CorkCounters& GetCorkCounters();

// The flusher's clock: incremented once per kTickNs while corks are listed.
uint64_t CurrentTick();

// `cork` started holding bytes.  REQUIRES: cork->mu() held.  Also tells
// vsocket/kernel_wait.h that bytes are held back.
void ListCorked(const std::shared_ptr<SendCork>& cork, ToeEngine* engine);

// Every listed cork's bytes go out now, without blocking (the flushes of
// one call share io_uring_enters).  Any thread.
void FlushAllCorked();

// Takes `fd` (a private duplicate of a closed connection's socket; the
// list closes it) and copies [data, data + len) to send on it.  Any thread.
void AdoptOrphan(int fd, const char* data, size_t len);

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_CORK_LIST_H_
