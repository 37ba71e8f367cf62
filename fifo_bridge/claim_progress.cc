#include "fifo_bridge/claim_progress.h"

#include <mutex>

namespace vsocket::fifo {
namespace {

// The listeners of the last claims seen; a new one replaces the one seen
// longest ago (a process talks to few listeners at a time).
struct Progress {
  pid_t listener = 0;
  int64_t newest_made_ns = 0;  // the latest-made offer of ours it claimed
  int64_t seen_ns = 0;         // when its latest claim was seen
};
constexpr int kListeners = 16;

struct Table {
  std::mutex mu;
  Progress entries[kListeners];
};

// Never destroyed: atexit handlers may close connections.
Table& Listeners() {
  static Table* table = new Table();
  return *table;
}

}  // namespace

void NoteOfferClaimed(pid_t listener, int64_t made_ns, int64_t seen_ns) {
  Table& t = Listeners();
  std::lock_guard<std::mutex> lock(t.mu);
  Progress* slot = &t.entries[0];
  for (Progress& p : t.entries) {
    if (p.listener == listener) {
      slot = &p;
      break;
    }
    if (p.seen_ns < slot->seen_ns) slot = &p;
  }
  if (slot->listener != listener) *slot = Progress{listener, made_ns, seen_ns};
  if (made_ns > slot->newest_made_ns) slot->newest_made_ns = made_ns;
  if (seen_ns > slot->seen_ns) slot->seen_ns = seen_ns;
}

int64_t ClaimDeadlineByProgress(pid_t listener, int64_t made_ns, int64_t timeout_ns) {
  Table& t = Listeners();
  std::lock_guard<std::mutex> lock(t.mu);
  for (const Progress& p : t.entries) {
    if (p.listener != listener) continue;
    if (p.newest_made_ns > made_ns) return 0;
    return p.seen_ns + timeout_ns;
  }
  return 0;
}

}  // namespace vsocket::fifo
