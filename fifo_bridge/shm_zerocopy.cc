// ShmTransport's in-place receive (Transport::RecvInPlace/ReleaseInPlace,
// the explicit API's vsocket_recv_inplace): the application reads the
// receive ring itself.  Waiting is RecvMsg's own (a one-byte MSG_PEEK, so
// spinning, timeouts, EINTR, end of stream, resets and the move to TCP
// behave exactly as for recv; after the move the successor serves views);
// the view is then taken under the ring's receive lock, and the release
// consumes under it as a recv would (the peer's writer block lifted, our
// wake-ups drained).
#include <errno.h>
#include "fifo_bridge/shm_provider.h"
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "fifo_bridge/shm_transport.h"
#include "vsocket/stats.h"

namespace vsocket::fifo {

ssize_t ShmTransport::RecvInPlace(const void** data, size_t max, int flags,
                                  const IoOptions& io) {
  if (Transport* next = MovedTo()) return next->RecvInPlace(data, max, flags, io);
  if (max == 0) return 0;
  {
    std::lock_guard<std::mutex> lock(inplace_mu_);
    if (!inplace_view_.TryBegin()) {  // ours while we wait: a second caller gets EBUSY
      errno = EBUSY;
      return -1;
    }
  }
  ssize_t r;
  for (;;) {
    uint8_t probe;
    struct iovec iov = {&probe, 1};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    r = RecvMsg(&msg, MSG_PEEK | (flags & MSG_DONTWAIT), io);
    if (r <= 0 || MovedTo()) break;
    const uint8_t* view = nullptr;
    int64_t n;
    {
      // Not held while taking inplace_mu_ below: ReleaseInPlace takes
      // inplace_mu_, then this lock (the order ThreadSanitizer checks).
      // The bytes stay put without it: only a consumer moves the tail.
      SideLock lock(&channel_.side()->recv_lock);
      n = channel_.consumer()->Contiguous(&view);
      if (n == kCorrupt) {
        channel_.ResetConnection("peer published an impossible producer index");
        r = channel_.ResetOutcome(/*sending=*/false);
      }
    }
    if (n == kCorrupt) {
      if (r < 0) {
        errno = static_cast<int>(-r);
        r = -1;
      }
      break;
    }
    if (n > 0) {
      size_t len = std::min<size_t>(static_cast<size_t>(n), max);
      std::lock_guard<std::mutex> state(inplace_mu_);
      inplace_view_.Show(len);
      *data = view;
      return static_cast<ssize_t>(len);
    }
    // The peeked byte was consumed by another holder of the connection (a
    // forked process): wait again.
  }
  int saved = errno;
  {
    std::lock_guard<std::mutex> lock(inplace_mu_);
    inplace_view_.End();
  }
  if (r > 0) return MovedTo()->RecvInPlace(data, max, flags, io);  // now TCP
  channel_.UpdateHangup();
  errno = saved;
  return r;
}

int ShmTransport::ReleaseInPlace(size_t n, const IoOptions& io) {
  std::lock_guard<std::mutex> lock(inplace_mu_);
  if (!inplace_view_.taken()) {
    if (Transport* next = MovedTo()) return next->ReleaseInPlace(n, io);
    return Transport::ReleaseInPlace(n, io);  // no view: EINVAL
  }
  if (!inplace_view_.CanRelease(n)) {
    errno = EINVAL;  // still waiting (another thread's call), or too many
    return -1;
  }
  if (n > 0) {
    SideLock side(&channel_.side()->recv_lock);
    channel_.consumer()->Discard(n);
    StatsBytesReceivedSerialised(live_slot(), kShmKind, n);
    channel_.LiftPeerWriterBlock();
    channel_.AfterConsume(false);
  }
  inplace_view_.End();
  return 0;
}

}  // namespace vsocket::fifo
