// RdmaTransport's zero-copy calls for the explicit API (vsocket_send_registered,
// vsocket_recv_inplace / vsocket_recv_release; include/vsocket/vsocket.h).
//
// Send: the application's region is registered with the connection's
// device the first time it is sent there (one MR per device and process,
// cached in the ZeroCopyRegion, local read only), then
// RdmaChannel::SendRegisteredAsync posts RDMA WRITEs from it straight into
// the peer's ring: no copy.  Every channel call is non-blocking under
// Core::mu; waits for ring space sleep on the user descriptor's POLLOUT as
// SendMsg does, and the call returns once the NIC has read the bytes
// (the last ticket's completion), so the buffer may be reused at once.
//
// Receive: the view is our receive ring itself (RdmaChannel::
// TryPeekContiguous); nothing is consumed or credited until the release.
//
// Every call ends in a CallScope, as SendMsg/RecvMsg do, so the CQ is
// armed (or its arming deferred) before the application may wait outside
// vsocket.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "rdma_backend/rdma_transport.h"
#include "rdma_backend/rdma_transport_core.h"
#include "rdma_backend/rdma_provider.h"
#include "rdma_backend/rdma_stats.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"
#include "vsocket/zerocopy_region.h"

namespace vsocket::rdma {
namespace {

// How long one sleep waiting for a zero-copy completion lasts at most.
// Nothing on the user descriptor announces that completion, and the
// progress thread may consume its event between our arming the CQ and our
// poll(): the next slice then sees it.
constexpr int64_t kZeroCopySliceNs = 1'000'000;

// A region's memory registration on one device (keyed by its MemoryPool).
class DeviceRegistration final : public ZeroCopyRegion::Attachment {
 public:
  explicit DeviceRegistration(std::unique_ptr<UserRegion> mr)
      : mr_(std::move(mr)), pid_(getpid()) {
    StatsRdmaUserRegion(static_cast<int64_t>(mr_->size()));
  }
  ~DeviceRegistration() override {
    StatsRdmaUserRegion(-static_cast<int64_t>(mr_->size()));
    // A forked child's copy names the parent's MR (the verbs context is
    // shared): deregistering it here would pull it from under the parent.
    if (getpid() != pid_) (void)mr_.release();
  }
  const UserRegion& mr() const { return *mr_; }

 private:
  std::unique_ptr<UserRegion> mr_;
  const pid_t pid_;
};

}  // namespace

const UserRegion* RdmaTransport::RegistrationFor(ZeroCopyRegion& region) {
  MemoryPool* pool;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    pool = core_->channel->pool();
  }
  if (pool == nullptr) {
    errno = ENOTCONN;
    return nullptr;
  }
  // Registration pins pages (a system call, maybe milliseconds): never
  // under Core::mu.
  ZeroCopyRegion::Attachment* a = region.FindOrAttach(
      pool, [&]() -> std::unique_ptr<ZeroCopyRegion::Attachment> {
        auto mr = UserRegion::Register(pool, region.data(), region.size());
        if (!mr) return nullptr;
        return std::make_unique<DeviceRegistration>(std::move(mr));
      });
  return a ? &static_cast<DeviceRegistration*>(a)->mr() : nullptr;
}

int RdmaTransport::AwaitZeroCopy(uint64_t ticket, uint32_t spin_ns) {
  Core& c = *core_;
  auto settled = [&] {
    return c.channel->ZeroCopyCompleted(ticket) || c.channel->error() != 0 ||
           c.channel->closed();
  };
  while (!c.SpinThenArm(settled, spin_ns)) {
    // EINTR and the slice's end alike: look again (the buffer is the NIC's
    // until the completion, so a signal cannot end this wait).
    (void)SleepUntil(0, MonotonicNs() + kZeroCopySliceNs);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  int err = 0;
  if (c.channel->error() != 0 || !c.channel->ZeroCopyCompleted(ticket)) {
    err = c.channel->error() != 0 ? c.channel->error() : ECONNRESET;
    c.error_reported = true;
  }
  c.UpdateReadiness();
  return err;
}

ssize_t RdmaTransport::SendRegistered(ZeroCopyRegion& region, size_t offset,
                                      size_t len, int flags,
                                      const IoOptions& io) {
  if (!core_ || core_->Inherited()) {
    errno = ECONNRESET;
    return -1;
  }
  // A zero-byte send reports a broken connection as SendMsg does.
  if (len == 0) return Transport::SendRegistered(region, offset, len, flags, io);
  const UserRegion* mr = RegistrationFor(region);
  if (mr == nullptr) return -1;
  Core& c = *core_;
  CallScope scope(c, io.spin_ns);  // arms the CQ (or defers it) on return
  bool nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
  int64_t deadline = nonblocking ? 0 : DeadlineAfter(io.timeout_ns);
  const WaitOptions now{0, 0};
  uint64_t done = 0;
  uint64_t ticket = 0;  // covers every byte posted so far (in-order CQ)
  int err = 0;
  for (;;) {
    ssize_t n;
    err = 0;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      uint64_t t = 0;
      n = c.channel->SendRegisteredAsync(*mr, offset + done, len - done, now, &t);
      if (n < 0) err = errno;
      if (n > 0) ticket = t;
      c.AfterAttempt(n, err, nonblocking);
    }
    if (n > 0) {
      StatsBytesSent(live_slot(), kRdmaKind, static_cast<uint64_t>(n));
      done += static_cast<uint64_t>(n);
      if (done >= len) break;
      continue;
    }
    if (n == 0 || err != EAGAIN || nonblocking) break;
    // Ring full: wait for credits.
    if (WaitWritable(io.spin_ns, deadline) != 0) {
      err = errno;  // EAGAIN (timeout) or EINTR
      break;
    }
  }
  if (done > 0) {
    // What was posted is the NIC's until its completion.
    int werr = AwaitZeroCopy(ticket, io.spin_ns);
    if (werr != 0) {
      errno = werr;
      return -1;
    }
    return static_cast<ssize_t>(done);
  }
  if (err == EPIPE && !(flags & MSG_NOSIGNAL)) ::raise(SIGPIPE);
  errno = err;
  return -1;
}

ssize_t RdmaTransport::RecvInPlace(const void** data, size_t max, int flags,
                                   const IoOptions& io) {
  if (!core_ || core_->Inherited()) {
    errno = ECONNRESET;
    return -1;
  }
  if (max == 0) return 0;
  Core& c = *core_;
  CallScope scope(c, io.spin_ns);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.inplace.TryBegin()) {  // ours while we wait: a second caller gets EBUSY
      errno = EBUSY;
      return -1;
    }
  }
  bool nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
  int64_t deadline = nonblocking ? 0 : DeadlineAfter(io.timeout_ns);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(c.mu);
      ssize_t n;
      int err = 0;
      const uint8_t* view = nullptr;
      n = c.channel->TryPeekContiguous(&view);
      if (n < 0) err = errno;
      if (n < 0 && err == EAGAIN && c.shut_rd) n = err = 0;  // as TryRecv
      c.AfterAttempt(n, err, nonblocking);
      if (n > 0) {
        c.inplace.Show(std::min<size_t>(static_cast<size_t>(n), max));
        *data = view;
        return static_cast<ssize_t>(c.inplace.length());
      }
      if (n == 0 || err != EAGAIN || nonblocking) {
        c.inplace.End();
        if (n == 0) return 0;  // end of stream
        errno = err;
        return -1;
      }
    }
    if (WaitReadable(io.spin_ns, deadline) != 0) {
      int err = errno;  // EAGAIN (timeout) or EINTR
      std::lock_guard<std::mutex> lock(c.mu);
      c.inplace.End();
      errno = err;
      return -1;
    }
  }
}

int RdmaTransport::ReleaseInPlace(size_t n, const IoOptions& io) {
  if (!core_ || core_->Inherited()) {
    errno = ECONNRESET;
    return -1;
  }
  Core& c = *core_;
  CallScope scope(c, io.spin_ns);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.inplace.CanRelease(n)) {
      errno = EINVAL;  // no view, still waiting (another thread), too many
      return -1;
    }
    c.channel->Consume(n);  // credits the peer once enough was consumed
    c.inplace.End();
    c.UpdateReadiness();
  }
  if (n > 0) StatsBytesReceived(live_slot(), kRdmaKind, n);
  return 0;
}

}  // namespace vsocket::rdma
