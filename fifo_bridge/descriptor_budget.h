// How many shared-memory connections this process may hold: at most
// VSOCKET_MAX_SHM_CONNECTIONS (reason connection_limit past it), and, when
// their private descriptors count against the application's RLIMIT_NOFILE
// (base/private_fd.h: the hard limit leaves no room above the soft one),
// a share of that table (reason fd_limit).
//
// Each connection holds private descriptors beside the application's: a
// named segment (held by its name) only its liveness TCP socket
// (kNamedSegmentFds); a sealed one (handed over by descriptor, when the
// listener is another user's or VSOCKET_SHARE_UIDS is set) also the
// segment's memfd and its SideState memfd (kSealedSegmentFds).  They
// may take at most VSOCKET_FD_SHARE percent of the soft limit; a connection
// beyond that takes kernel TCP with reason fd_limit, so the application
// keeps the rest of its table and gets EMFILE where the kernel would give
// it, not sooner.  When private descriptors live above the soft limit, the
// cap is what the range between the soft and the hard limit holds (less
// kPrivateFdsForProcess), since they never spill below it.
//
// A DescriptorReservation stands for one connection and its descriptors:
// taken before they are made (client offer, server claim, exec adoption),
// held by the transport, given back on release.  Thread-safe; a forked
// child inherits the counts with the connections.
#ifndef VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_
#define VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_

#include "vsocket/fallback_reason.h"

namespace vsocket::fifo {

// Private descriptors of one connection, by the kind of its segment.
inline constexpr int kNamedSegmentFds = 1;
inline constexpr int kSealedSegmentFds = 3;
// Private descriptors a process keeps besides its connections' (watcher
// epoll and eventfd, listener markers, the live page): kept free for them.
inline constexpr int kPrivateFdsForProcess = 64;

class DescriptorReservation {
 public:
  DescriptorReservation() = default;
  // One more connection holding `fds` descriptors, if both fit the budget;
  // else an empty reservation (false) and *why says which limit (kFdLimit,
  // kConnectionLimit).
  static DescriptorReservation Take(int fds, FallbackReason* why);
  // Counts a connection that exists already (adopted across exec),
  // whatever the budget.
  static DescriptorReservation Force(int fds);
  // Raises this connection's descriptors to `fds` (a claim that found a
  // sealed offer), if that fits; false with *why otherwise, and the
  // reservation is unchanged.  REQUIRES: held.
  bool GrowTo(int fds, FallbackReason* why);
  ~DescriptorReservation() { Give(); }
  DescriptorReservation(DescriptorReservation&& other) noexcept
      : fds_(other.fds_) {
    other.fds_ = 0;
  }
  DescriptorReservation& operator=(DescriptorReservation&& other) noexcept {
    if (this != &other) {
      Give();
      fds_ = other.fds_;
      other.fds_ = 0;
    }
    return *this;
  }
  explicit operator bool() const { return fds_ > 0; }
  // Gives the connection's descriptors back to the budget (idempotent).
  void Give();

 private:
  int fds_ = 0;  // 0: holds nothing
};

// Connections and their descriptors counted now (for tests and stats).
int ReservedConnections();
int ReservedDescriptors();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_
