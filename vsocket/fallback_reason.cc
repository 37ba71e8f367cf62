#include "vsocket/fallback_reason.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/real_libc.h"

namespace vsocket {
namespace {

struct Entry {
  const char* name;
  const char* meaning;
};

constexpr int kCore = static_cast<int>(FallbackReason::kFirstRegistered);

// The core's reasons, by number (the enumerators' order).
constexpr Entry kCoreReasons[kCore] = {
    {"", ""},
    {"disabled_by_config", "`VSOCKET_TRANSPORT=tcp`"},
    {"disabled_by_rule", "a rule of the rules file (`VSOCKET_CONFIG`) said `tcp`"},
    {"transport_unavailable",
     "`VSOCKET_TRANSPORT` names a transport this build does not have"},
    {"peer_not_vsocket",
     "the other end is a plain TCP program (for a transport that probes the peer "
     "first: the probe was rejected, i.e. no vsocket listener of that transport on "
     "that port)"},
    {"peer_not_local",
     "the peer is on another host, and no transport of this build reaches it"},
    {"uid_mismatch",
     "the process that accepts (server) or the client runs as another user that "
     "`VSOCKET_SHARE_UIDS` (on either end) does not list; counted on both ends"},
    {"connect_in_progress", "a non-blocking connect did not complete at once"},
    {"fd_limit",
     "vsocket's own descriptors for one more connection would exceed "
     "`VSOCKET_FD_SHARE` of `RLIMIT_NOFILE` (or the room between the soft and the "
     "hard limit), or setup hit `EMFILE`"},
    {"local_ports_busy",
     "the client's socket had no port yet and no port of "
     "`ip_local_port_range` could be bound (32 random ports, then `bind(0)`: "
     "thousands of connections of the last minute in `TIME_WAIT`): an offer is "
     "named after the client's port before the SYN, so the kernel, whose "
     "`connect()` may reuse a `TIME_WAIT` port, chooses one instead"},
    {"short_lived",
     "this process's last 8 connections to the same address and port each moved "
     "data in fewer than `VSOCKET_SHORT_CALLS` calls (one request, one answer, "
     "close): a fast path's setup would cost more than it saves "
     "(`VSOCKET_TRANSPORT=auto` only)"},
    {"exec_not_preloaded",
     "the connection moved to kernel TCP before an exec into an image that is not "
     "preloaded"},
    {"stdio_descriptor",
     "the connection moved to kernel TCP when placed on 0, 1 or 2 or given to "
     "`fdopen()` (`VSOCKET_STDIO`)"},
    {"peer_moved_to_tcp",
     "the peer moved the connection to kernel TCP (one of the two reasons above, on "
     "its side)"},
    {"zerocopy",
     "the program set `SO_ZEROCOPY`: `MSG_ZEROCOPY` completions come only from "
     "kernel TCP's error queue, so the connection moved there (or, set before "
     "`connect()`, never left it)"},
    {"descriptor_passed",
     "the connection was sent to another process in an `SCM_RIGHTS` message: it "
     "moved to kernel TCP first, so that the receiver gets the TCP socket, as "
     "without vsocket"},
    {"clone",
     "the process called `clone()` or `syscall(SYS_clone)` without `CLONE_VM` "
     "(vsftpd): the child runs no fork handler, so the connection moved to kernel "
     "TCP first and both processes share it as without vsocket"},
    {"spawn",
     "the program called `posix_spawn`, `system` or `popen`, whose exec libc makes "
     "out of vsocket's sight: a connection the new image may inherit moved to "
     "kernel TCP first"},
    {"io_uring",
     "the program started io_uring, whose socket operations the kernel runs "
     "without libc: from then on every connection of the process is on kernel TCP "
     "(existing ones moved)"},
};

// Registered reasons.  An entry is written once, under `mu`, before
// `count` is raised past it (release); readers load `count` (acquire) and
// read only below it.
struct Registered {
  std::mutex mu;
  Entry entries[kMaxFallbackReasons] = {};
  std::atomic<int> count{kCore};
};

// Never destroyed: names are read until the last atexit handler.
Registered& TheRegistered() {
  static Registered* r = new Registered();
  return *r;
}

const Entry* Find(FallbackReason reason) {
  int i = static_cast<int>(reason);
  if (i < kCore) return &kCoreReasons[i];
  Registered& r = TheRegistered();
  if (i >= r.count.load(std::memory_order_acquire)) return nullptr;
  return &r.entries[i];
}

[[noreturn]] void TooMany(const char* name) {
  char line[160];
  int n = std::snprintf(line, sizeof(line),
                        "vsocket: fallback reason %s: more than %d reasons registered\n",
                        name, kMaxFallbackReasons);
  ssize_t ignored = sys::write(STDERR_FILENO, line, n > 0 ? static_cast<size_t>(n) : 0);
  (void)ignored;
  std::abort();
}

}  // namespace

FallbackReason RegisterFallbackReason(const char* name, const char* meaning) {
  for (int i = 1; i < kCore; ++i) {
    if (std::strcmp(kCoreReasons[i].name, name) == 0) return static_cast<FallbackReason>(i);
  }
  Registered& r = TheRegistered();
  std::lock_guard<std::mutex> lock(r.mu);
  int count = r.count.load(std::memory_order_relaxed);
  for (int i = kCore; i < count; ++i) {
    if (std::strcmp(r.entries[i].name, name) == 0) return static_cast<FallbackReason>(i);
  }
  if (count >= kMaxFallbackReasons) TooMany(name);
  r.entries[count] = {name, meaning};
  r.count.store(count + 1, std::memory_order_release);
  return static_cast<FallbackReason>(count);
}

const char* FallbackReasonName(FallbackReason reason) {
  const Entry* e = Find(reason);
  return e ? e->name : "unknown";
}

const char* FallbackReasonMeaning(FallbackReason reason) {
  const Entry* e = Find(reason);
  return e ? e->meaning : "";
}

int FallbackReasonCount() {
  return TheRegistered().count.load(std::memory_order_acquire);
}

}  // namespace vsocket
