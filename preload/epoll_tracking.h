// epoll registrations made on a virtual socket before it was connected.
//
// A successful connect() to a local vsocket listener puts the shared-memory
// wait socket at the application's descriptor number (dup3 over the kernel
// TCP socket).  An epoll registration made before that (Netty and others
// add a socket to their epoll set before connecting) still refers to the old
// TCP socket, which carries no data after the switch.  So connect() removes
// the registrations it knows of before the switch and adds them again, with
// the same events and data, on whatever the number names afterwards.
//
// Thread safety: all functions may be called concurrently.
#ifndef VSOCKET_PRELOAD_EPOLL_TRACKING_H_
#define VSOCKET_PRELOAD_EPOLL_TRACKING_H_

#include <sys/epoll.h>

#include <vector>

namespace vsocket::preload {

// Once, from InitDescriptors() (fork handlers: this lock is taken after the
// descriptor lock).
void InitEpollTracking();

struct EpollRegistration {
  int epfd;
  struct epoll_event event;
};

// After a successful epoll_ctl() on a virtual socket that is not connected
// yet (VirtualSocket::State::kFresh).
void NoteEpollCtl(int epfd, int op, int fd, const struct epoll_event* event);

// connect(): removes the registrations of `fd` from their sets and returns
// them; RestoreEpollRegistrations adds them back (to the object `fd` names
// now).  `keep` keeps tracking them (the socket may connect again later).
std::vector<EpollRegistration> DetachEpollRegistrations(int fd);
void RestoreEpollRegistrations(int fd,
                               const std::vector<EpollRegistration>& regs,
                               bool keep);

// The number `fd` was closed or now refers to something else.
void ForgetEpollRegistrations(int fd);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_TRACKING_H_
