#include "vsocket/stats.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "base/real_libc.h"
#include "vsocket/config.h"
#include "vsocket/fallback_advice.h"
#include "vsocket/live_stats.h"
#include "vsocket/log.h"

namespace vsocket {
namespace {

constexpr int kKinds = kMaxTransportKinds;
static_assert(kKinds == kLiveKinds, "the live page has a column per kind");
static_assert(kMaxFallbackReasons == kLiveReasons, "the live page counts every reason");

// The counters themselves live in the live statistics page (live_stats.h):
// the totals in its header, the bytes of open connections in their slots.
std::atomic<bool> g_reason_logged[kMaxFallbackReasons];
// Sections providers add to the JSON (RegisterStatsSection).
constexpr int kMaxSections = 8;
std::atomic<StatsSection> g_sections[kMaxSections];
std::atomic<int> g_section_count{0};

LiveHeader::Kind& Of(TransportKind kind) {
  return LiveStatsHeader()->kinds[KindIndex(kind)];
}

void PrintAtExit() {
  std::string text = StatsJson() + "\n";
  // Then, for each reason a user can act on, how.
  const LiveHeader* header = LiveStatsHeaderIfMade();
  const int reasons = FallbackReasonCount();
  for (int r = 1; header && r < reasons; ++r) {
    uint64_t n = header->reasons[r].load(std::memory_order_relaxed);
    const char* name = FallbackReasonName(static_cast<FallbackReason>(r));
    const char* advice = FallbackReasonAdvice(name);
    if (n == 0 || !advice) continue;
    text += "vsocket: " + std::to_string(n) + " connection" + (n == 1 ? "" : "s") +
            " on kernel TCP for " + name + ": " + advice + "\n";
  }
  ssize_t ignored = sys::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace

void StatsConnectionOpened(TransportKind kind) {
  Of(kind).connections.fetch_add(1, std::memory_order_relaxed);
}

void StatsConnectionMoved(TransportKind from, TransportKind to) {
  Of(from).connections.fetch_sub(1, std::memory_order_relaxed);
  Of(to).connections.fetch_add(1, std::memory_order_relaxed);
}

void StatsBytesSent(TransportKind kind, uint64_t bytes) {
  Of(kind).bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
}

namespace {

// Takes up to `bytes` from `counter`: what it took.
uint64_t TakeUpTo(std::atomic<uint64_t>& counter, uint64_t bytes) {
  uint64_t have = counter.load(std::memory_order_relaxed);
  uint64_t take;
  do {
    take = have < bytes ? have : bytes;
  } while (!counter.compare_exchange_weak(have, have - take, std::memory_order_relaxed));
  return take;
}

}  // namespace

void StatsBytesSentMoved(LiveSlot* slot, TransportKind from, TransportKind to,
                         uint64_t bytes) {
  if (slot) {
    uint64_t moved = TakeUpTo(slot->bytes_sent[KindIndex(from)], bytes);
    slot->bytes_sent[KindIndex(to)].fetch_add(moved, std::memory_order_relaxed);
  } else {
    uint64_t moved = TakeUpTo(Of(from).bytes_sent, bytes);
    Of(to).bytes_sent.fetch_add(moved, std::memory_order_relaxed);
  }
}

void StatsBytesReceived(TransportKind kind, uint64_t bytes) {
  Of(kind).bytes_received.fetch_add(bytes, std::memory_order_relaxed);
}

void StatsFallback(FallbackReason reason, const char* detail) {
  int i = static_cast<int>(reason);
  if (i <= 0 || i >= FallbackReasonCount()) return;
  LiveStatsHeader()->reasons[i].fetch_add(1, std::memory_order_relaxed);
  if (!g_reason_logged[i].exchange(true, std::memory_order_relaxed)) {
    VSOCKET_LOG(kInfo, "connection on kernel TCP: %s%s%s",
                FallbackReasonName(reason), detail && *detail ? ": " : "",
                detail ? detail : "");
  }
}

void RegisterStatsSection(StatsSection section) {
  static std::mutex mu;  // registrations only; StatsJson reads the atomics
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < g_section_count.load(std::memory_order_acquire); ++i) {
    if (g_sections[i].load(std::memory_order_relaxed) == section) return;
  }
  int i = g_section_count.load(std::memory_order_relaxed);
  if (i >= kMaxSections) return;
  g_sections[i].store(section, std::memory_order_relaxed);
  g_section_count.store(i + 1, std::memory_order_release);
}

std::string StatsJson() {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "{\"pid\":%d,\"transports\":{",
                static_cast<int>(::getpid()));
  std::string out = buf;
  // Closed connections' bytes are in the header, open ones' in their slots.
  const LiveHeader* header = LiveStatsHeaderIfMade();
  uint64_t open_sent[kKinds] = {}, open_received[kKinds] = {};
  LiveStatsSumOpen(open_sent, open_received);
  bool first = true;
  for (int k = 0; header && k < kKinds; ++k) {
    const LiveHeader::Kind& c = header->kinds[k];
    uint64_t conns = c.connections.load(std::memory_order_relaxed);
    uint64_t sent = c.bytes_sent.load(std::memory_order_relaxed) + open_sent[k];
    uint64_t received =
        c.bytes_received.load(std::memory_order_relaxed) + open_received[k];
    if (conns == 0 && sent == 0 && received == 0) continue;
    std::snprintf(buf, sizeof(buf),
                  "%s\"%s\":{\"connections\":%llu,\"bytes_sent\":%llu,"
                  "\"bytes_received\":%llu}",
                  first ? "" : ",", TransportKindName(static_cast<TransportKind>(k)),
                  static_cast<unsigned long long>(conns),
                  static_cast<unsigned long long>(sent),
                  static_cast<unsigned long long>(received));
    out += buf;
    first = false;
  }
  out += "},\"fallback_reasons\":{";
  first = true;
  const int reasons = FallbackReasonCount();
  for (int r = 1; header && r < reasons; ++r) {
    uint64_t n = header->reasons[r].load(std::memory_order_relaxed);
    if (n == 0) continue;
    std::snprintf(buf, sizeof(buf), "%s\"%s\":%llu", first ? "" : ",",
                  FallbackReasonName(static_cast<FallbackReason>(r)),
                  static_cast<unsigned long long>(n));
    out += buf;
    first = false;
  }
  out += "}";
  int sections = g_section_count.load(std::memory_order_acquire);
  for (int i = 0; i < sections; ++i) g_sections[i].load(std::memory_order_relaxed)(&out);
  out += "}";
  return out;
}

void StatsInstallExitHook() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (GetConfig().print_stats) std::atexit(PrintAtExit);
  });
}

}  // namespace vsocket
