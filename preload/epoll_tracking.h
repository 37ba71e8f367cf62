// The per-descriptor index of epoll registrations: which sets each virtual
// socket is registered in, and with what, so that they can follow
// a descriptor number when the kernel object behind it changes:
//  - a successful connect() to a local vsocket listener puts the
//    shared-memory wait socket at the application's number (dup3 over the
//    kernel TCP socket); a registration made before that (Netty and others
//    add a socket to their epoll set before connecting) would stay with the
//    old TCP socket, which carries no data after the switch;
//  - an unclaimed shared-memory offer that falls back to TCP puts the TCP
//    socket back at that number (vsocket/descriptor_swap.h).
// Around either change the registrations are removed and added again, with
// the same events and data, on whatever the number names afterwards.
// Registrations in a set whose epoll descriptor is closed are forgotten
// (closing it with close_range or dup2 over it is not seen).  Each change
// is reported to its set (epoll_set.h) under this index's lock, so that a
// set's rebuild from RegistrationsIn never misses one.
//
// Thread safety: all functions may be called concurrently.
#ifndef VSOCKET_PRELOAD_EPOLL_TRACKING_H_
#define VSOCKET_PRELOAD_EPOLL_TRACKING_H_

#include <sys/epoll.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "preload/epoll_set.h"

namespace vsocket {
class VirtualSocket;
}  // namespace vsocket

namespace vsocket::preload {

// Once, from InitDescriptors(): the fork handlers of this index, then the
// sets' (EpollSet::InstallForkHandlers), so that fork's prepare takes this
// index's lock after the sets' kernel locks (and after the descriptor
// lock).  Under this lock only a set's change-queue lock is taken.
void InitEpollTracking();

struct EpollRegistration {
  int epfd;
  struct epoll_event event;
};

// After a successful epoll_ctl() on a virtual socket.
void NoteEpollCtl(int epfd, int op, int fd, const struct epoll_event* event);

// Removes the registrations of `fd` from their sets and returns them;
// RestoreEpollRegistrations adds them back (to the object `fd` names now)
// and keeps tracking them.
std::vector<EpollRegistration> DetachEpollRegistrations(int fd);
// Whether `fd` is tracked as registered in `epfd`, and with what.
bool TrackedRegistration(int epfd, int fd, struct epoll_event* event);
void RestoreEpollRegistrations(int fd,
                               const std::vector<EpollRegistration>& regs);

// The number `fd` was closed or now refers to something else.
void ForgetEpollRegistrations(int fd);

// The number `fd` of `socket` was closed (or now names something else)
// while another number of the same open file stays open (dup).  The kernel
// keys a registration by (number, open file), so fd's registrations live
// on: they are still reported, with their data, until the file's last
// number is closed or their set is, and can no longer be changed (epoll(7)).
// They are kept here, following the socket rather than the number, under
// a key of their own (a negative number, unique) that the sets use as
// their descriptor.  REQUIRES: fd's changes deferred by the busy poll were
// applied first (EpollSet::ApplyPendingOf), while fd still named it.
void KeepRegistrationsOfClosedNumber(int fd,
                                     const std::shared_ptr<VirtualSocket>& socket);
// The last number of `socket` is being closed: the registrations kept for
// its closed numbers go, as the kernel's go with the file.
void ForgetKeptRegistrations(const VirtualSocket* socket);

// The tracked registrations in set `epfd`, in no particular order.
std::vector<EpollSet::Registration> RegistrationsIn(int epfd);

// The descriptor `fd`, not a virtual socket, is being closed: if it was an
// epoll set, forget the registrations made in it.  One atomic load when no
// registration is tracked.
void ForgetEpollSetRegistrations(int fd);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_TRACKING_H_
