#include "preload/descriptor_passing.h"

#include <errno.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "base/real_libc.h"
#include "base/user_copy_guard.h"
#include "preload/descriptors.h"
#include "preload/exec_handover.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/log.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport_provider.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {

// The kernel takes at most SCM_MAX_FD (253) descriptors in one message.
constexpr int kMaxPassed = 253;

struct PassedFds {
  int fds[kMaxPassed];
  int count = 0;
};

// Calls `each(fd)` for every descriptor of the SCM_RIGHTS messages in
// [control, control + len).  Touches only that memory.  The last message
// may end unpadded (msg_controllen = CMSG_LEN(n), as vsftpd sends): the
// kernel takes that, and the walk stops there.
template <typename Each>
void ForEachRight(const char* control, size_t len, Each&& each) {
  size_t at = 0;
  while (at <= len && len - at >= sizeof(struct cmsghdr)) {
    const auto* c = reinterpret_cast<const struct cmsghdr*>(control + at);
    size_t c_len = c->cmsg_len;
    if (c_len < CMSG_LEN(0) || c_len > len - at) return;
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t n = (c_len - CMSG_LEN(0)) / sizeof(int);
      const unsigned char* data = CMSG_DATA(c);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
        each(fd, data + i * sizeof(int));
      }
    }
    at += CMSG_ALIGN(c_len);  // past `len` only by the last one's padding
  }
}

// Reads the descriptors `msg` passes, under the fault guard.  False when
// the process cannot read `msg` or its control data.
bool ReadPassedFds(const struct msghdr* msg, PassedFds* out) {
  InstallUserCopyGuard();
  return GuardedUserCopy([&] {
    const char* control = static_cast<const char*>(msg->msg_control);
    size_t len = msg->msg_controllen;
    if (control == nullptr) return;
    ForEachRight(control, len, [&](int fd, const unsigned char*) {
      if (out->count < kMaxPassed) out->fds[out->count++] = fd;
    });
  });
}

}  // namespace

bool MayPassVirtualSockets() { return HighestVirtualFd() >= 0; }

PassedRights::PassedRights(const struct msghdr* msg) : original_(msg) {
  if (msg == nullptr || !MayPassVirtualSockets() || SharesParentMemory()) return;
  PassedFds passed;
  if (!ReadPassedFds(msg, &passed) || passed.count == 0) return;
  int highest = HighestVirtualFd();
  std::vector<int> stuck;
  int saved = errno;
  for (int i = 0; i < passed.count; ++i) {
    int fd = passed.fds[i];
    if (fd < 0 || fd > highest || !Ours(fd)) continue;
    std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
    if (vs && vs->state() == VirtualSocket::State::kListening) {
      for (const auto& attachment : vs->listeners()) {
        if (attachment) attachment->PassedOut();
      }
      continue;
    }
    // true for anything but a connection that could not move (listeners,
    // unconnected sockets, connections on kernel TCP already).
    if (!MoveConnectionToKernelTcp(fd, FallbackReason::kDescriptorPassed)) {
      stuck.push_back(fd);
    }
  }
  if (!stuck.empty()) Substitute(stuck);
  errno = saved;
}

PassedRights::~PassedRights() {
  for (int fd : resets_) sys::close(fd);
}

void PassedRights::Substitute(const std::vector<int>& stuck) {
  copy_ = *original_;
  control_.resize(original_->msg_controllen);
  const char* from = static_cast<const char*>(original_->msg_control);
  if (!GuardedUserCopy([&] { std::memcpy(control_.data(), from, control_.size()); })) return;
  copy_.msg_control = control_.data();
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true, std::memory_order_relaxed)) {
    VSOCKET_LOG(kWarn, "a connection passed in an SCM_RIGHTS message could not move "
                "to kernel TCP (RDMA, or reset): the receiver gets a reset socket");
  }
  ForEachRight(control_.data(), control_.size(), [&](int fd, const unsigned char* at) {
    for (int s : stuck) {
      if (s != fd) continue;
      int reset = OpenResetSocket();
      if (reset < 0) return;  // the original number goes: no worse than before
      resets_.push_back(reset);
      std::memcpy(const_cast<unsigned char*>(at), &reset, sizeof(int));
      return;
    }
  });
  substituted_ = true;
}

void AdoptReceivedListeners(const struct msghdr* msg) {
  if (msg == nullptr || msg->msg_control == nullptr ||
      msg->msg_controllen < CMSG_LEN(sizeof(int)) || SharesParentMemory()) {
    return;
  }
  int saved = errno;
  // The kernel wrote this control data just now: it is readable.
  ForEachRight(static_cast<const char*>(msg->msg_control), msg->msg_controllen,
               [](int fd, const unsigned char*) {
                 if (fd >= 0) AdoptReceivedListener(fd);
               });
  errno = saved;
}

}  // namespace vsocket::preload
