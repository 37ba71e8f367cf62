#include "vsocket/hazard_slots.h"

#include <atomic>

namespace vsocket::hazard {
namespace {

constexpr int kRecords = 256;  // threads that may hold slots at once

// One thread's slots, alone on its cache line: only its thread writes them
// (and the fork child's reset); removers read them.
struct alignas(64) Record {
  std::atomic<const void*> slot[kSlotsPerThread];
  std::atomic<bool> in_use;
};

Record g_records[kRecords];
// Records [0, g_used) have been handed out at least once.
std::atomic<int> g_used{0};
std::atomic<int> g_retired{0};

constexpr int kUnassigned = -1;
constexpr int kNoRecord = -2;  // pool exhausted, or the thread is exiting

__attribute__((tls_model("initial-exec"))) thread_local int t_record = kUnassigned;

// Gives the thread's record back when the thread exits.
struct RecordReturn {
  bool armed = false;
  ~RecordReturn() {
    int r = t_record;
    t_record = kNoRecord;
    if (r < 0) return;
    for (auto& s : g_records[r].slot) s.store(nullptr, std::memory_order_seq_cst);
    g_records[r].in_use.store(false, std::memory_order_release);
  }
};
thread_local RecordReturn t_record_return;

int AcquireRecord() {
  for (int i = 0; i < kRecords; ++i) {
    Record& rec = g_records[i];
    if (rec.in_use.load(std::memory_order_relaxed) ||
        rec.in_use.exchange(true, std::memory_order_acq_rel)) {
      continue;
    }
    int used = g_used.load(std::memory_order_seq_cst);
    while (used < i + 1 &&
           !g_used.compare_exchange_weak(used, i + 1, std::memory_order_seq_cst)) {
    }
    t_record = i;
    t_record_return.armed = true;  // first use registers the thread-exit hook
    return i;
  }
  t_record = kNoRecord;
  return kNoRecord;
}

}  // namespace

int Protect(const void* p) {
  int r = t_record;
  if (r == kUnassigned) r = AcquireRecord();
  if (r < 0) return -1;
  Record& rec = g_records[r];
  for (int i = 0; i < kSlotsPerThread; ++i) {
    const void* expected = nullptr;
    if (rec.slot[i].load(std::memory_order_relaxed) == nullptr &&
        rec.slot[i].compare_exchange_strong(expected, p,
                                            std::memory_order_seq_cst)) {
      return r * kSlotsPerThread + i;
    }
  }
  return -1;
}

bool Release(int slot) {
  g_records[slot / kSlotsPerThread]
      .slot[slot % kSlotsPerThread]
      .exchange(nullptr, std::memory_order_seq_cst);
  return g_retired.load(std::memory_order_seq_cst) != 0;
}

bool IsProtected(const void* p) {
  int used = g_used.load(std::memory_order_seq_cst);
  for (int r = 0; r < used; ++r) {
    for (const auto& s : g_records[r].slot) {
      if (s.load(std::memory_order_seq_cst) == p) return true;
    }
  }
  return false;
}

void NoteRetired(int delta) {
  g_retired.fetch_add(delta, std::memory_order_seq_cst);
}

void ForgetOtherThreads() {
  int mine = t_record;
  int used = g_used.load(std::memory_order_relaxed);
  for (int r = 0; r < used; ++r) {
    if (r == mine) continue;
    for (auto& s : g_records[r].slot) s.store(nullptr, std::memory_order_relaxed);
    g_records[r].in_use.store(false, std::memory_order_relaxed);
  }
}

}  // namespace vsocket::hazard
