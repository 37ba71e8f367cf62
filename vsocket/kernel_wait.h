// The one thing to do before an application may sleep in the kernel on
// descriptors vsocket gave it.
//
// A transport may leave its wake-up source disarmed while its connection is
// busy (RDMA: a spinning call that found its completion does not arm the
// completion queue; the progress thread arms it after an idle period).  A
// caller about to wait in poll/select/epoll_wait asks every provider
// (TransportProvider::BeforeKernelWait) for the arming now, so the wait
// sees the next event at once.
//
// Threading: any thread; never blocks (a per-connection mutex is taken
// briefly).  Cost: one relaxed atomic load when nothing is deferred.
#ifndef VSOCKET_VSOCKET_KERNEL_WAIT_H_
#define VSOCKET_VSOCKET_KERNEL_WAIT_H_

namespace vsocket {

void BeforeKernelWait();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_KERNEL_WAIT_H_
