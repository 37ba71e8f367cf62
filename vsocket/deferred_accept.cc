#include "vsocket/deferred_accept.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <atomic>
#include <cstring>

#include "base/real_libc.h"
#include "base/user_copy_guard.h"
#include "vsocket/log.h"

namespace vsocket {
namespace {

bool HasFastPath(const VirtualSocket& vs) {
  return vs.state() == VirtualSocket::State::kListening && !vs.listeners().empty();
}

// Moves a non-zero kernel value to `vs` and clears it in the kernel.
void TakeFromKernel(VirtualSocket* vs, int fd) {
  int seconds = 0;
  socklen_t len = sizeof(seconds);
  if (sys::getsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, &len) != 0) return;
  vs->set_held_defer_accept(seconds);
  if (seconds == 0) return;
  int zero = 0;
  sys::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &zero, sizeof(zero));
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    VSOCKET_LOG(kInfo,
                "TCP_DEFER_ACCEPT (%d s) is kept from the kernel on vsocket listeners: "
                "their fast-path clients send nothing on TCP",
                seconds);
  }
}

}  // namespace

bool SetDeferAccept(VirtualSocket* vs, int fd, const void* val, socklen_t len,
                    int* rc) {
  if (!HasFastPath(*vs)) return false;
  // The kernel checks the arguments and rounds the value; then it is taken
  // back off the kernel.
  *rc = sys::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, val, len);
  if (*rc == 0) TakeFromKernel(vs, fd);
  return true;
}

bool GetDeferAccept(const VirtualSocket& vs, void* val, socklen_t* len,
                    int* rc) {
  int seconds = vs.held_defer_accept();
  if (seconds < 0) return false;
  // As the kernel: reads the length, copies min(*len, sizeof(int)) bytes
  // and writes the length back; a bad pointer is EFAULT.
  socklen_t given;
  *rc = -1;
  if (val == nullptr || len == nullptr) {
    errno = EFAULT;
    return true;
  }
  if (!CopyFromUser(&given, len, sizeof(given))) return true;
  socklen_t n = given < static_cast<socklen_t>(sizeof(int)) ? given : sizeof(int);
  if (!CopyToUser(val, &seconds, n) || !CopyToUser(len, &n, sizeof(n))) return true;
  *rc = 0;
  return true;
}

void HoldDeferAcceptFromKernel(VirtualSocket* vs, int fd) {
  if (HasFastPath(*vs)) TakeFromKernel(vs, fd);
}

}  // namespace vsocket
