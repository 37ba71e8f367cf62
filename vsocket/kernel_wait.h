// The one thing to do before an application may sleep in the kernel on
// descriptors vsocket gave it.
//
// Two things may leave a wake-up source disarmed.  A user-space poller may
// hold connections (vsocket/user_space_holds.h): all of them are given back
// first.  And a transport may leave its wake-up source disarmed while its
// connection is busy (RDMA: a spinning call that found its completion does
// not arm the completion queue; the progress thread arms it after an idle
// period): every provider (TransportProvider::BeforeKernelWait) arms now.
// A caller about to wait in poll/select/epoll_wait calls this, so the wait
// sees the next event at once.
//
// Threading: any thread; never blocks (mutexes are taken briefly).  Cost:
// a few relaxed atomic loads and one store when nothing is held or
// deferred.
#ifndef VSOCKET_VSOCKET_KERNEL_WAIT_H_
#define VSOCKET_VSOCKET_KERNEL_WAIT_H_

#include <cstdint>

namespace vsocket {

void BeforeKernelWait();

// Before any wait -- a look or a sleep -- for descriptors vsocket gave the
// application (the interposed poll/select/epoll_wait, vsocket_poll, a
// blocking send or receive): bytes a transport accepted but holds back
// (RDMA's corked sends) go out first, so no
// wait waits for bytes its own process has not sent.  BeforeKernelWait()
// does it too.  Any thread; one relaxed atomic load when nothing is held
// back.
void BeforeWait();
// Changes with every BeforeWait() of the process (any thread; relaxed,
// never back to an earlier value).  A transport
// that holds back a send only within a burst uses it to see that the
// program waited -- for readiness or an error -- since its last send.
uint64_t WaitEpoch();
// A transport now holds back accepted bytes: the next BeforeWait() calls
// every provider's TransportProvider::FlushHeldBack().  Any thread.
void NoteHeldBackBytes();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_KERNEL_WAIT_H_
