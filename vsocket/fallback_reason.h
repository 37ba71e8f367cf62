// Why a connection did not take a fast path.  Every fallback or refusal has
// one of these names; they appear in VSOCKET_STATS, in the log (once per
// reason at VSOCKET_LOG=info) and through vsocket_fallback_reason().
// The names are a stable interface: add new ones, never rename.
#ifndef VSOCKET_VSOCKET_FALLBACK_REASON_H_
#define VSOCKET_VSOCKET_FALLBACK_REASON_H_

namespace vsocket {

enum class FallbackReason {
  kNone = 0,              // on a fast path
  kDisabledByConfig,      // VSOCKET_TRANSPORT=tcp
  kPeerNotVsocket,        // the other end is a plain TCP program
  kPeerNotLocal,          // peer on another host and no RDMA path
  kUidMismatch,           // peer runs as another user
  kShmSetupFailed,        // could not create or map the ring segment
  kRendezvousNameInUse,   // a doorbell name for this 4-tuple is taken
  kClaimTimeout,          // the server never claimed the offer
  kPeerSpokeTcp,          // bytes arrived on TCP before a claim: plain peer
  kInvalidOffer,          // the client's segment failed validation
  kOfferRevoked,          // the client gave up on the offer before accept
  kConnectInProgress,     // non-blocking connect did not finish at once
  kNoRdmaDevice,          // no local RDMA device, or none reaches the peer
  kRdmaProbeFailed,       // the peer's RDMA CM did not answer in time
  kRdmaMemoryLimit,       // VSOCKET_RDMA_MAX_REGISTERED_MB would be exceeded
  kRdmaSetupFailed,       // channel setup failed, or the pairing was lost
  kTransportUnavailable,  // VSOCKET_TRANSPORT names no transport of this build
  kClaimDeclined,         // the accepting process could not claim the offer
  kExecNotPreloaded,      // exec into an image that is not preloaded
  kStdioDescriptor,       // placed on 0, 1 or 2, or given to fdopen (stdio)
  kPeerMovedToTcp,        // the peer moved the connection to TCP
  kFdLimit,               // private descriptors would exceed RLIMIT_NOFILE
  kConnectionLimit,       // VSOCKET_MAX_SHM_CONNECTIONS reached
  kIoUringUnavailable,    // toe: io_uring cannot be used in this process
  kDisabledByRule,        // a rule of the rules file (VSOCKET_CONFIG) said tcp
  kShortLived,            // this destination's recent connections were short
  kLocalPortsBusy,        // no free local port to name the offer before the SYN
  kPidNamespace,          // peer in another PID namespace (host-network container)
  kZeroCopy,              // SO_ZEROCOPY: completions only kernel TCP queues
  kDescriptorPassed,      // sent to another process in an SCM_RIGHTS message
  kClone,                 // a raw clone() child shares it, unseen by fork handlers
  kSpawn,                 // posix_spawn/system/popen: inherited by an exec libc hides
  kIoUring,               // the process started io_uring, whose socket operations bypass libc
  kCount,
};

// "peer_not_vsocket" etc.; "" for kNone.
const char* FallbackReasonName(FallbackReason reason);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_FALLBACK_REASON_H_
