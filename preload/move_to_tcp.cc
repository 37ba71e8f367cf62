#include "preload/move_to_tcp.h"

#include <errno.h>
#include <fcntl.h>

#include <vector>

#include "base/real_libc.h"
#include "preload/descriptors.h"
#include "preload/exec_handover.h"
#include "vsocket/config.h"
#include "vsocket/descriptor_swap.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {

namespace {

struct Copy {
  int from;
  int onto;
};

// Makes `onto` a duplicate of `from`, keeping its close-on-exec flag; the
// descriptor-swap hook moves its epoll registrations along.
void DuplicateOnto(void* arg) {
  auto* c = static_cast<Copy*>(arg);
  int fd_flags = sys::fcntl(c->onto, F_GETFD);
  sys::dup3(c->from, c->onto, (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0);
}

}  // namespace

bool MoveConnectionToKernelTcp(int fd, FallbackReason reason) {
  std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
  if (!vs || vs->state() != VirtualSocket::State::kConnected) return true;
  Transport* t = vs->TransportFinishingConnect(fd);
  if (!t || (t->capabilities() & kCapKernelStream)) return true;
  int saved = errno;
  std::vector<int> numbers = NumbersOf(fd);
  int user = t->user_fd();
  bool moved = t->MoveToKernelTcp(reason);
  if (moved) {
    // `user` names the TCP socket now; its duplicates still name the old
    // wait socket.
    for (int n : numbers) {
      if (n == user || !IsVsocketWaitSocket(n)) continue;
      Copy copy = {user, n};
      ReplaceUserDescriptor(n, &DuplicateOnto, &copy);
    }
  }
  errno = saved;
  return moved;
}

bool HasUnreadRingBytes(int fd) {
  auto vs = LookupSocket(fd);
  if (!vs || vs->state() != VirtualSocket::State::kConnected) return false;
  Transport* t = vs->TransportFinishingConnect(fd);
  int saved = errno;
  bool unread = t && !(t->capabilities() & kCapKernelStream) && t->ReadableBytes() > 0;
  errno = saved;
  return unread;
}

void MoveConnectionsToKernelTcp(bool (*include)(int fd), FallbackReason reason) {
  int highest = HighestVirtualFd();
  if (highest < 0 || SharesParentMemory()) return;
  int saved = errno;
  for (int pass = 0; pass < 2; ++pass) {
    for (int fd = 0; fd <= highest; ++fd) {
      if (!MaybeVirtualFd(fd) || !include(fd)) continue;
      if (pass == 0 && !HasUnreadRingBytes(fd)) continue;
      MoveConnectionToKernelTcp(fd, reason);
    }
  }
  errno = saved;
}

int DuplicateKeepingStdioOnTcp(DupOp op, int oldfd, int target, int flags) {
  if (SharesParentMemory() || !GetConfig().stdio_on_tcp)
    return Duplicate(op, oldfd, target, flags);
  // glibc's stdio reads and writes 0, 1 and 2 behind the interposer's
  // back (and an exec'd program that uses them may not be preloaded): a
  // connection placed there continues on kernel TCP.  dup2/dup3 name the
  // number: move first.  dup and F_DUPFD take the lowest free number at
  // or above theirs, which is 0, 1 or 2 only if the program closed one:
  // move after the copy is made, before the program has it (moving on
  // every F_DUPFD from 0, as CPython's socket.dup() makes, would send all
  // its copied connections to TCP).
  bool onto_number = op == DupOp::kDup2 || op == DupOp::kDup3;
  if (onto_number && target >= 0 && target <= 2 && target != oldfd)
    MoveConnectionToKernelTcp(oldfd, FallbackReason::kStdioDescriptor);
  int result = Duplicate(op, oldfd, target, flags);
  if (!onto_number && result >= 0 && result <= 2) {
    int saved = errno;
    MoveConnectionToKernelTcp(result, FallbackReason::kStdioDescriptor);
    errno = saved;
  }
  return result;
}

}  // namespace vsocket::preload
