// The control channel between the two processes of a forked test pair: a
// plain AF_UNIX stream socketpair (never vsocket), carrying int64 values
// (ports, tokens, counts) so that the ends can hand each other a port or
// wait for each other.  Each value is one write of 8 bytes; a short read or
// write means the other process died, and Fail()s (child_check.h).
#ifndef VSOCKET_TESTS_SUPPORT_CONTROL_CHANNEL_H_
#define VSOCKET_TESTS_SUPPORT_CONTROL_CHANNEL_H_

#include <cstdint>

namespace vsocket_test {

// One end of the channel, inside one process.
struct ControlEnd {
  int fd = -1;
  void Send(int64_t value);
  int64_t Recv();  // blocks until the other end sends
};

// Both ends, as made before the fork.  By convention the server uses side
// 0 and the client side 1; a value sent on one side is received on the
// other.  REQUIRES: the side used is the one this process kept open.
struct ControlPair {
  int fds[2] = {-1, -1};
  // socketpair(); false (errno set) if it failed.
  bool Open();
  void Send(int side, int64_t value) { ControlEnd{fds[side]}.Send(value); }
  int64_t Recv(int side) { return ControlEnd{fds[side]}.Recv(); }
};

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_CONTROL_CHANNEL_H_
