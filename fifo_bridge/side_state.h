// State private to one side of a shared-memory connection, in MAP_SHARED
// memory so that processes forked from the owner share it (POSIX: a socket
// stays usable in a forked child), and in a file so that it can be handed to
// a new program image across exec (fifo_bridge/shm_handover.cc).  Where:
//  - a segment private to one user (the default) keeps it in its side's slot
//    of the segment's header page (ShmSegment::side_state_slot): no
//    descriptor of its own.  The peer maps that page too and is trusted not
//    to write our slot, as a process of the same user can reach our memory
//    anyway (ptrace, /proc/<pid>/mem);
//  - a sealed segment, which another user may map (VSOCKET_SHARE_UIDS),
//    keeps it in a page of its own that the peer never sees: a sealed memfd
//    (size fixed) whose descriptor is private (sys::DupPrivate range),
//    close-on-exec, and owned by whoever created or adopted the mapping.  Holds the authoritative ring indices, the locks that serialise
// producers and consumers across threads and forked processes, and the
// count of processes that still hold the connection.
#ifndef VSOCKET_FIFO_BRIDGE_SIDE_STATE_H_
#define VSOCKET_FIFO_BRIDGE_SIDE_STATE_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace vsocket::fifo {

// Bits of SideState::local_flags.
inline constexpr uint32_t kLocalShutRead = 1u << 0;
inline constexpr uint32_t kLocalShutWrite = 1u << 1;
inline constexpr uint32_t kLocalPeerGone = 1u << 2;   // liveness TCP closed
inline constexpr uint32_t kLocalReset = 1u << 3;      // we saw corruption/RST
inline constexpr uint32_t kLocalRevoked = 1u << 4;    // offer fell back to TCP
inline constexpr uint32_t kLocalResetReported = 1u << 5;  // ECONNRESET returned
inline constexpr uint32_t kLocalReadHangupShown = 1u << 6;  // POLLRDHUP raised
inline constexpr uint32_t kLocalHangupShown = 1u << 7;      // POLLHUP raised
// The one send TCP accepts after the peer's close was made (dropped).
inline constexpr uint32_t kLocalSentToClosedPeer = 1u << 8;
// The peer moved the connection to TCP and we have resent what it had not
// read: our sends go to TCP while our receive ring drains.
inline constexpr uint32_t kLocalTxOnTcp = 1u << 9;

// The bit of SideState::spinners that stands for user-space pollers.
inline constexpr uint32_t kSpinnersPollerHold = 1u << 31;

struct SideState {
  pthread_mutex_t send_lock;  // robust, process-shared
  pthread_mutex_t recv_lock;  // robust, process-shared
  uint64_t head;              // our producer index into the tx ring
  uint64_t tail;              // our consumer index into the rx ring
  std::atomic<uint32_t> holders;     // processes holding this connection
  // Threads busy-polling the rx ring, plus kSpinnersPollerHold while a
  // user-space poller holds the connection (ShmChannel::
  // TakePollerHold).  Non-zero: the consumer is not armed.
  std::atomic<uint32_t> spinners;
  std::atomic<uint32_t> local_flags;
  std::atomic<int32_t> pending_error;  // for SO_ERROR
  // The FallbackReason of a move to TCP, for every holder's successor.
  // Always one of the core's reasons (Transport::MoveToKernelTcp's, or
  // peer_moved_to_tcp): their numbers are the same in every process, where
  // a registered reason's number is not (vsocket/fallback_reason.h).
  std::atomic<uint32_t> moved_reason;
  // SO_SNDBUF as the kernel reports it, once the application set it (0:
  // never): with the peer's RingControl::recv_window, bounds our bytes in
  // flight.
  std::atomic<uint32_t> send_buffer;
  // `head` when the transmit ring was last trimmed (shm_trim.cc).  Guarded
  // by send_lock.
  uint64_t trimmed_head;
  // Threads (of any process holding this side) asleep in the kernel inside
  // a blocking receive: while there are any, no user-space poller may hold
  // the connection (ShmChannel::TakePollerHold).
  std::atomic<uint32_t> kernel_sleepers;
  // SO_RCVLOWAT: the receive ring is readable (poll, epoll, select) only
  // with more than this many bytes in it, or at end of stream or an error.
  // The mark less one, capped so the peer's window can reach it
  // (ShmTransport::RecvLowatChanged); 0 (the default): any byte.  Shared by
  // every process holding this side, as the option is the socket's.
  std::atomic<uint32_t> readable_above;
  // TCP_CORK as the application set it (non-zero: in), for every process
  // holding this side: sends are then held (shm_cork.cc).
  std::atomic<uint32_t> corked;
  // When the bytes held now began to be held (MonotonicNs); stale while
  // nothing is held (RingProducer::Held).  Written under send_lock.
  std::atomic<int64_t> hold_since_ns;
};

// Bytes of the mapping (one page).
inline constexpr size_t kSideStateBytes = 4096;
static_assert(sizeof(SideState) <= kSideStateBytes);

// Initialises a SideState in place, in `slot`: memory shared with every
// process that holds this side (a MAP_SHARED mapping), at least
// sizeof(SideState) bytes, aligned for it.  Used for the slot of a segment
// private to one user (ShmSegment::side_state_slot), which costs no
// descriptor of its own.
SideState* InitSideStateIn(void* slot);

// Maps and initialises a SideState in a page of its own (for segments that
// another user may map); nullptr with errno on failure.  *fd gets the memfd
// behind it (private, close-on-exec), or -1 when memfd_create is
// unavailable and the page is anonymous (it then cannot cross exec).
SideState* CreateSideState(int* fd);
// Maps the SideState behind an inherited descriptor after checking that it
// is a sealed regular file of exactly kSideStateBytes; nullptr with errno
// (EINVAL for anything else).  Does not take ownership of `fd`.
SideState* MapInheritedSideState(int fd);
// Unmaps `state` and closes `fd` (either may be null/-1).
void DestroySideState(SideState* state, int fd);

// Scoped lock on a robust process-shared mutex; recovers a mutex whose holder
// died (the state it guards is indices that stay consistent at every store).
class SideLock {
 public:
  explicit SideLock(pthread_mutex_t* mutex);
  // Without waiting: owns_lock() says whether it got the mutex.
  SideLock(pthread_mutex_t* mutex, bool try_only);
  bool owns_lock() const { return mutex_ != nullptr; }
  ~SideLock();
  SideLock(const SideLock&) = delete;
  SideLock& operator=(const SideLock&) = delete;

 private:
  pthread_mutex_t* mutex_;
};

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SIDE_STATE_H_
