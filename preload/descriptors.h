// Which descriptor numbers refer to which virtual socket, beyond what the
// core's SocketTable records: the duplicates made by dup/dup2/dup3/F_DUPFD,
// and what happens when one of several numbers is closed.
//
// The core names a connected socket by one number, Transport::user_fd().
// When the application closes that number while a duplicate stays open
// (`dup2(s, 5); close(s);` as bash does for /dev/tcp), the transport is
// told to use the duplicate instead (Transport::MoveUserFd) before the
// number goes away.  The connection itself is released when its last number
// is closed, as the kernel releases a socket when its last descriptor closes.
//
// Thread safety: every function may be called from any thread.  One mutex
// guards the alias sets; it is never held while a connection is released
// (that may replay an unclaimed offer into TCP) nor across a blocking call.
// fork(): the child keeps the parent's (identical) sets.
#ifndef VSOCKET_PRELOAD_DESCRIPTORS_H_
#define VSOCKET_PRELOAD_DESCRIPTORS_H_

#include <memory>
#include <vector>

namespace vsocket {
class VirtualSocket;
}

namespace vsocket::preload {

// Once, from the library constructor, after the SocketTable exists (its
// fork handlers must run after ours in the parent: lock order is ours first).
void InitDescriptors();

// A new number refers to a virtual socket (socket, accept, dup).
void NoteVirtualFd(int fd);
// A socket inherited across exec (exec_adopt.cc) is known by `fds`, all of
// them open descriptors of one file: registers each as a number of `vs`.
void NoteAdoptedSocket(const std::shared_ptr<VirtualSocket>& vs,
                       const std::vector<int>& fds);
// No number above this ever referred to a virtual socket (for scans).
int HighestVirtualFd();

enum class DupOp { kDup, kDup2, kDup3, kDupFd, kDupFdCloexec };
// The dup family when the old or the new number may be virtual.
// `target` is newfd for kDup2/kDup3 and the lowest number for kDupFd*.
int Duplicate(DupOp op, int oldfd, int target, int flags);

// close() of a number that may be virtual.
int CloseDescriptor(int fd);
// The bookkeeping of close() without the close itself: for numbers that
// the kernel closes on its own (close_range, exec) or is about to replace.
void ForgetDescriptor(int fd);

// Every number of the socket behind `fd` in this process (just `fd` when
// it has no duplicates; empty when it is not a virtual socket).
std::vector<int> NumbersOf(int fd);
// True in a child made by vfork() (or clone(CLONE_VM)) that has not exec'd
// yet: it shares the parent's memory, so it must not change the tables.
bool SharesParentMemory();

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_DESCRIPTORS_H_
