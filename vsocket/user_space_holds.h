// The connections that user-space pollers hold (Transport::
// HoldForUserSpacePoll): while held, a peer publishing data does not make
// the connection's descriptor readable, so nobody may sleep in the kernel
// on it.  Every interposed or explicit wait that is about to sleep in the
// kernel calls BeforeKernelWait() (vsocket/kernel_wait.h), which gives all
// of this process's holds back through DropAllUserSpaceHolds().
//
// A poller (preload/epoll_set.h, vsocket/poll_user_space.h) calls
// NoteUserSpaceHold for each connection it holds, on every look: a
// connection already listed since the last drop costs one relaxed load.
// The list keeps weak references, so a held connection that the
// application closes is destroyed at once (its Release() ends the hold).
//
// Threading: any thread.  DropAllUserSpaceHolds costs one relaxed load
// when nothing is held.
#ifndef VSOCKET_VSOCKET_USER_SPACE_HOLDS_H_
#define VSOCKET_VSOCKET_USER_SPACE_HOLDS_H_

#include <cstdint>
#include <memory>
#include <vector>

namespace vsocket {

class Transport;
class VirtualSocket;

// `t` (a transport of `socket`) reported a hold in place.
void NoteUserSpaceHold(const std::shared_ptr<VirtualSocket>& socket,
                       Transport* t);

// Ends every noted hold (Transport::DropUserSpaceHold) and empties the list.
void DropAllUserSpaceHolds();

// The transport of `socket` (numbered `fd`) when a user-space poller can
// watch it: connected, with kCapUserSpaceReadiness; nullptr otherwise.
Transport* WatchableTransport(VirtualSocket& socket, int fd);

// One thread's sleep in the kernel for some connections' data
// (Transport::NoteKernelSleeper): Add() counts it on each, destruction
// ends it on those still alive.  Keeps weak references only, so a close
// by another thread during the sleep is not delayed.
class KernelSleepers {
 public:
  KernelSleepers() = default;
  KernelSleepers(const KernelSleepers&) = delete;
  KernelSleepers& operator=(const KernelSleepers&) = delete;
  ~KernelSleepers();
  void Add(const std::shared_ptr<VirtualSocket>& socket, Transport* t);

 private:
  struct Sleeper {
    std::weak_ptr<VirtualSocket> socket;
    Transport* transport;  // valid while `socket` lives
  };
  std::vector<Sleeper> sleepers_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_USER_SPACE_HOLDS_H_
