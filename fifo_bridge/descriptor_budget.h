// How many shared-memory connections this process may hold: at most
// VSOCKET_MAX_SHM_CONNECTIONS (reason connection_limit past it), and, when
// their private descriptors count against the application's RLIMIT_NOFILE
// (base/private_fd.h: the hard limit leaves no room above the soft one),
// a share of that table (reason fd_limit).
//
// Each connection holds PrivateFdsPerConnection() descriptors beside the
// application's: its liveness TCP socket (a named segment is held by its
// name, not a descriptor); while sharing with other users, also the sealed
// segment's memfd and its SideState memfd.  They
// may take at most VSOCKET_FD_SHARE percent of the soft limit; a connection
// beyond that takes kernel TCP with reason fd_limit, so the application
// keeps the rest of its table and gets EMFILE where the kernel would give
// it, not sooner.  When private descriptors live above the soft limit, the
// cap is what the range between the soft and the hard limit holds (less
// kPrivateFdsForProcess), since they never spill below it.
//
// A DescriptorReservation stands for one connection's descriptors: taken
// before they are made (client offer, server claim, exec adoption), held
// by the transport, given back on release.  Thread-safe; a forked child
// inherits the count with the connections.
#ifndef VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_
#define VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_

#include "vsocket/fallback_reason.h"

namespace vsocket::fifo {

// 1, or 3 while VSOCKET_SHARE_UIDS makes every segment a sealed one.
int PrivateFdsPerConnection();
// Private descriptors a process keeps besides its connections' (watcher
// epoll and eventfd, listener markers, the live page): kept free for them.
inline constexpr int kPrivateFdsForProcess = 64;

class DescriptorReservation {
 public:
  DescriptorReservation() = default;
  // One more connection, if it fits the budget; else an empty reservation
  // (false) and *why says which limit (kFdLimit, kConnectionLimit).
  static DescriptorReservation Take(FallbackReason* why);
  // Counts a connection that exists already (adopted across exec),
  // whatever the budget.
  static DescriptorReservation Force();
  ~DescriptorReservation() { Give(); }
  DescriptorReservation(DescriptorReservation&& other) noexcept
      : held_(other.held_) {
    other.held_ = false;
  }
  DescriptorReservation& operator=(DescriptorReservation&& other) noexcept {
    if (this != &other) {
      Give();
      held_ = other.held_;
      other.held_ = false;
    }
    return *this;
  }
  explicit operator bool() const { return held_; }
  // Gives the connection's descriptors back to the budget (idempotent).
  void Give();

 private:
  bool held_ = false;
};

// Connections counted now (for tests and stats).
int ReservedConnections();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_DESCRIPTOR_BUDGET_H_
