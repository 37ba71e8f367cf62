// The explicit API's zero-copy calls (include/vsocket/vsocket.h, section
// "Zero copy"): registered regions, vsocket_send_registered, and the
// in-place receive.  Each call maps onto the connection's Transport
// (Transport::SendRegistered / RecvInPlace / ReleaseInPlace); transports
// without a zero-copy path copy (transport_zerocopy.cc).  Nothing here
// blocks except inside those transport calls.
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdint>
#include <new>

#include "base/real_libc.h"
#include "vsocket/socket_table.h"
#include "vsocket/transport.h"
#include "vsocket/vsocket.h"
#include "vsocket/zerocopy_region.h"

// The C handle is the region itself.
struct vsocket_region {
  vsocket_region(const void* buf, size_t len) : region(buf, len) {}
  vsocket::ZeroCopyRegion region;
};

namespace {

using vsocket::LookupSocket;
using vsocket::Transport;
using vsocket::VirtualSocket;
namespace sys = vsocket::sys;

// For a descriptor vsocket does not know: the errno the kernel's recv()
// would set for it (EBADF, ENOTSOCK), or EOPNOTSUPP for a kernel socket
// (its bytes have no place vsocket could show in place).
int ForeignDescriptorError(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return EBADF;
  return S_ISSOCK(st.st_mode) ? EOPNOTSUPP : ENOTSOCK;
}

// The connected transport of `fd` for an in-place call, or nullptr with
// errno set.
Transport* InPlaceTransport(int fd, std::shared_ptr<VirtualSocket>* vs) {
  *vs = LookupSocket(fd);
  if (!*vs) {
    errno = ForeignDescriptorError(fd);
    return nullptr;
  }
  Transport* t = (*vs)->TransportFinishingConnect(fd);
  if (!t) errno = ENOTCONN;  // what recv says on an unconnected socket
  return t;
}

bool RangeInside(const vsocket_region* r, size_t offset, size_t len) {
  return r && offset <= r->region.size() && len <= r->region.size() - offset;
}

}  // namespace

extern "C" {

struct vsocket_region* vsocket_register(const void* buf, size_t len) {
  auto start = reinterpret_cast<uintptr_t>(buf);
  if (buf == nullptr || len == 0 || start + len < start) {
    errno = EINVAL;
    return nullptr;
  }
  auto* r = new (std::nothrow) vsocket_region(buf, len);
  if (!r) errno = ENOMEM;
  return r;
}

int vsocket_deregister(struct vsocket_region* r) {
  if (!r) {
    errno = EINVAL;
    return -1;
  }
  if (!r->region.TryRetire()) {
    errno = EBUSY;
    return -1;
  }
  delete r;  // its attachments deregister the memory from each device
  return 0;
}

ssize_t vsocket_send_registered(int fd, struct vsocket_region* r,
                                size_t offset, size_t len, int flags) {
  auto vs = LookupSocket(fd);
  Transport* t = vs ? vs->TransportFinishingConnect(fd) : nullptr;
  if (!RangeInside(r, offset, len)) {
    // A bad descriptor is reported first, as the kernel checks it first.
    int err = vs ? EINVAL : ForeignDescriptorError(fd);
    errno = err == EOPNOTSUPP ? EINVAL : err;
    return -1;
  }
  if (!r->region.Use()) {
    errno = EINVAL;  // being deregistered
    return -1;
  }
  const uint8_t* bytes = r->region.data() + offset;
  ssize_t n;
  if (t) {
    n = t->SendRegistered(r->region, offset, len, flags, vs->SendOptions());
    if (n > 0) vs->NoteDataCall();
  } else {
    // Not ours, or not connected: the kernel answers, as for send().
    n = sys::send(fd, bytes, len, flags);
  }
  int saved = errno;
  r->region.Unuse();
  errno = saved;
  return n;
}

ssize_t vsocket_recv_inplace(int fd, const void** data, size_t max, int flags) {
  std::shared_ptr<VirtualSocket> vs;
  Transport* t = InPlaceTransport(fd, &vs);
  if (!t) return -1;
  if (flags & ~MSG_DONTWAIT) {
    errno = EINVAL;
    return -1;
  }
  if (!data) {
    errno = EFAULT;
    return -1;
  }
  ssize_t n = t->RecvInPlace(data, max, flags, vs->RecvOptions());
  if (n > 0) vs->NoteDataCall();
  return n;
}

int vsocket_recv_release(int fd, size_t n) {
  std::shared_ptr<VirtualSocket> vs;
  Transport* t = InPlaceTransport(fd, &vs);
  if (!t) return -1;
  return t->ReleaseInPlace(n, vs->RecvOptions());
}

}  // extern "C"
