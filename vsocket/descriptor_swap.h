// Replacing the kernel object behind an application's descriptor number.
//
// A shared-memory client whose offer is never claimed falls back to TCP by
// putting the TCP socket at the number the application holds (dup3 over the
// wait socket).  Anything keyed by the old object rather than the number —
// epoll registrations — would silently stay with the old object, and an
// event loop would never hear of the connection again.  The interposer
// knows the registrations (preload/epoll_tracking.h), so it installs a hook
// that moves them around the swap.
//
// Threading: the hook is set once, at interposer start-up, before any
// connection exists; ReplaceUserDescriptor may run on any thread (the
// liveness watcher's included).
#ifndef VSOCKET_VSOCKET_DESCRIPTOR_SWAP_H_
#define VSOCKET_VSOCKET_DESCRIPTOR_SWAP_H_

namespace vsocket {

// Performs `swap(arg)`, which replaces the object behind `fd`, with
// whatever bookkeeping the hook adds before and after.
using DescriptorSwapHook = void (*)(int fd, void (*swap)(void*), void* arg);

void SetDescriptorSwapHook(DescriptorSwapHook hook);

// Calls the hook if one is set, else swap(arg) directly.
void ReplaceUserDescriptor(int fd, void (*swap)(void*), void* arg);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_DESCRIPTOR_SWAP_H_
