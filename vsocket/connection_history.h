// What this process's connections to each destination did, so that path
// selection can leave on kernel TCP the destinations whose connections are
// too short to repay a fast path's setup (reason short_lived).
//
// A fast path costs more to set up than a TCP connection (shared memory:
// a segment, doorbells and a claim on each side; RDMA: a CM exchange) and
// pays that back per message.  A client that opens a connection, sends one
// request, reads one answer and closes (HTTP/1.0, `ab` without -k, a
// health check) never gets it back: on this VM such connections ran at a
// quarter of kernel TCP's rate.  Linux's SMC gained a per-connection
// policy hook for the same reason.
//
// The measure is path-independent: the calls that moved data (send and
// receive families) in this process over the connection's life.  A client
// connection that closed after fewer than `short_calls` of them is short.
// After `streak` short connections in a row to one destination (address
// and port as connect() named them), new connections to it take kernel
// TCP; one connection that is not short (on TCP too: they are counted the
// same way) ends the prediction.  Only a policy that lets path selection
// choose (VSOCKET_TRANSPORT=auto, or a rule that says auto) consults it.
//
// Threading: any thread; one mutex guards the table (taken once per client
// connect and once per client close, never on the data path).  fork():
// the child inherits the table as it was.
#ifndef VSOCKET_VSOCKET_CONNECTION_HISTORY_H_
#define VSOCKET_VSOCKET_CONNECTION_HISTORY_H_

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace vsocket {

// A destination: family, port and address as connect() named them.
struct DestinationKey {
  std::array<uint8_t, 19> bytes{};  // family, port (2), address (4 or 16)
  bool operator==(const DestinationKey& other) const { return bytes == other.bytes; }
};

// false for anything but AF_INET/AF_INET6 of a sufficient length.
bool MakeDestinationKey(const struct sockaddr* addr, socklen_t len,
                        DestinationKey* key);

class ConnectionHistory {
 public:
  // `short_calls` 0: never predicts.  Past `max_destinations` the table
  // starts again empty (a bound, not a cache policy: programs talk to few).
  ConnectionHistory(uint32_t short_calls, uint32_t streak,
                    size_t max_destinations);

  // Whether a new connection to `key` should stay on kernel TCP.
  bool PredictsShort(const DestinationKey& key);
  // A client connection to `key` ended having moved data in `data_calls`
  // calls (counted up to at least short_calls).
  void Record(const DestinationKey& key, uint32_t data_calls);

  // For fork(): held across it so that the child's copy is consistent.
  void LockForFork() { mutex_.lock(); }
  void UnlockAfterFork() { mutex_.unlock(); }

 private:
  struct Hash {
    size_t operator()(const DestinationKey& k) const;
  };
  const uint32_t short_calls_;
  const uint32_t streak_;
  const size_t max_destinations_;
  std::mutex mutex_;
  // Short connections in a row, per destination (absent: none).
  std::unordered_map<DestinationKey, uint32_t, Hash> short_in_a_row_;
};

// The process's history, with VSOCKET_SHORT_CALLS (default 16; 0 turns
// the prediction off) and a streak of kShortStreak.
// Eight, not four: a mix with some short connections must rarely flip.
// The shm soak (connections closed after a random number of messages)
// sent 28 of 27,000 connections to TCP with 4, and 1 of 30,000 with 8.
inline constexpr uint32_t kShortStreak = 8;
ConnectionHistory& ProcessConnectionHistory();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_CONNECTION_HISTORY_H_
