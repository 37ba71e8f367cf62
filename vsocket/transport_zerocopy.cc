// The copying defaults of Transport's zero-copy calls (transport.h): what
// kernel TCP, and any transport without a better path, does for the
// explicit API's vsocket_send_registered / vsocket_recv_inplace.
#include <sys/socket.h>
#include <sys/uio.h>

#include "vsocket/transport.h"
#include "vsocket/zerocopy_region.h"

namespace vsocket {

ssize_t Transport::SendRegistered(ZeroCopyRegion& region, size_t offset,
                                  size_t len, int flags, const IoOptions& io) {
  struct iovec iov = {const_cast<uint8_t*>(region.data()) + offset, len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  return SendMsg(&msg, flags, io);
}

ssize_t Transport::RecvInPlace(const void** data, size_t max, int flags,
                               const IoOptions& io) {
  if (max == 0) return 0;
  return inplace_copy_.View(*this, data, max, flags, io);
}

int Transport::ReleaseInPlace(size_t n, const IoOptions& io) {
  return inplace_copy_.Release(*this, n, io);
}

}  // namespace vsocket
