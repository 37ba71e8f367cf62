// Why a connection did not take a fast path.  Every fallback or refusal has
// one of these names; they appear in VSOCKET_STATS, in the log (once per
// reason at VSOCKET_LOG=info), in vsocket-stat and through
// vsocket_fallback_reason().  The names are a stable interface: add new
// ones, never rename.
//
// The registry of reason names.  The core's own reasons (the ones it
// decides itself, or that more than one fabric reports in the core's
// words) are the enumerators below, numbered at compile time.  A backend
// registers its own reasons (RegisterFallbackReason) when its provider is
// installed, and uses the FallbackReason it gets back like any other.
// Registered reasons are numbered from kFirstRegistered in registration
// order: a number means a reason only within one process (the live page
// stores each number's name: vsocket/live_stats_layout.h).  Only the
// core's reasons may cross a process boundary as numbers.
//
// Threading: registration takes a mutex (start-up only); every lookup is
// lock-free and may run on any thread.
#ifndef VSOCKET_VSOCKET_FALLBACK_REASON_H_
#define VSOCKET_VSOCKET_FALLBACK_REASON_H_

#include <cstdint>

namespace vsocket {

enum class FallbackReason : uint8_t {
  kNone = 0,              // on a fast path
  kDisabledByConfig,      // VSOCKET_TRANSPORT=tcp
  kDisabledByRule,        // a rule of the rules file (VSOCKET_CONFIG) said tcp
  kTransportUnavailable,  // VSOCKET_TRANSPORT names no transport of this build
  kPeerNotVsocket,        // the other end is a plain TCP program
  kPeerNotLocal,          // peer on another host, and no transport reaches it
  kUidMismatch,           // peer runs as another user
  kConnectInProgress,     // non-blocking connect did not finish at once
  kFdLimit,               // private descriptors would exceed RLIMIT_NOFILE
  kLocalPortsBusy,        // no free local port to name the offer before the SYN
  kShortLived,            // this destination's recent connections were short
  kExecNotPreloaded,      // exec into an image that is not preloaded
  kStdioDescriptor,       // placed on 0, 1 or 2, or given to fdopen (stdio)
  kPeerMovedToTcp,        // the peer moved the connection to TCP
  kZeroCopy,              // SO_ZEROCOPY: completions only kernel TCP queues
  kDescriptorPassed,      // sent to another process in an SCM_RIGHTS message
  kClone,                 // a raw clone() child shares it, unseen by fork handlers
  kSpawn,                 // posix_spawn/system/popen: inherited by an exec libc hides
  kIoUring,               // the process started io_uring, whose socket operations bypass libc
  kFirstRegistered,       // backends' reasons: RegisterFallbackReason
};

// Numbers below this are all a process can have (the core's included).
inline constexpr int kMaxFallbackReasons = 64;

// Registers a backend's reason: `name` (lower case, '_' between words, at
// most 31 bytes) and `meaning` (one line for users, Markdown, the README's
// table), and returns its number in this process.  A name registered
// already returns that reason.
// REQUIRES: both strings live for the whole process; called when the
// backend's provider is installed (vsocket/provider_registry.h), before
// the live page names the reasons.  Past kMaxFallbackReasons the process
// is aborted: a build that registers that many fails its first test.
FallbackReason RegisterFallbackReason(const char* name, const char* meaning);

// "peer_not_vsocket" etc.; "" for kNone; "unknown" for a number not
// registered.
const char* FallbackReasonName(FallbackReason reason);
// The meaning given at registration; "" for kNone and unknown numbers.
const char* FallbackReasonMeaning(FallbackReason reason);
// One past the highest number known now: every number from 1 up to it
// names a reason.
int FallbackReasonCount();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_FALLBACK_REASON_H_
