// Descriptors that cross processes in SCM_RIGHTS messages, which the
// interposer sees in sendmsg/sendmmsg and recvmsg/recvmmsg on any socket
// (in practice a Unix one: vsocket's own sockets carry no control data).
//
// Sending: a passed number of a connection on shared memory, RDMA or toe
// would reach the receiver as vsocket's wait socket, or without the bytes
// read ahead into this process.  So every connected virtual socket among
// the passed descriptors first moves to kernel TCP (reason
// `descriptor_passed`), as for an exec into a plain image, and every
// number of it here names the TCP socket from then on, as on TCP.  A
// connection that cannot move (RDMA; one already reset) is passed as a
// reset socket instead: the receiver reads ECONNRESET, never a socket of
// another kind.
//
// A passed listener stops announcing shared memory here
// (ListenerAttachment::PassedOut): a plain receiver's clients then take
// TCP at once instead of waiting for a claim that would never come.
//
// Receiving: a listening TCP socket this process does not know yet
// becomes a listener of this process (exec_handover.h,
// AdoptReceivedListener), so that its accepts claim the offers clients
// make to the sender's marker.
//
// Threads: any; the moves take only the transports' own locks
// (move_to_tcp.h).  Nothing is done in a vfork child (its tables are the
// parent's).
#ifndef VSOCKET_PRELOAD_DESCRIPTOR_PASSING_H_
#define VSOCKET_PRELOAD_DESCRIPTOR_PASSING_H_

#include <sys/socket.h>

#include <vector>

namespace vsocket::preload {

// What one outgoing message should be sent as, once the connections it
// passes have moved.  Build it just before the send; keep it alive until
// the send returned (it owns the reset sockets it put in a copy).
class PassedRights {
 public:
  // Looks through `msg`'s control data.  A pointer the process cannot
  // read is left alone (the kernel answers the send with EFAULT).
  explicit PassedRights(const struct msghdr* msg);
  ~PassedRights();
  PassedRights(const PassedRights&) = delete;
  PassedRights& operator=(const PassedRights&) = delete;

  // `msg`, or the copy whose rights name reset sockets where connections
  // could not move.
  const struct msghdr* message() const { return substituted_ ? &copy_ : original_; }

 private:
  void Substitute(const std::vector<int>& stuck);

  const struct msghdr* original_;
  bool substituted_ = false;
  struct msghdr copy_ {};
  std::vector<char> control_;
  std::vector<int> resets_;
};

// False when no descriptor of this process was ever a virtual socket:
// then there is nothing to look for (one load).
bool MayPassVirtualSockets();

// After a receive that returned >= 0 into `msg`: adopts the listening
// sockets among the descriptors it received.  Cheap when the message
// carried no control data.
void AdoptReceivedListeners(const struct msghdr* msg);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_DESCRIPTOR_PASSING_H_
