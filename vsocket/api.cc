// The public C API (include/vsocket/vsocket.h): maps each POSIX-style call
// onto the VirtualSocket of its descriptor, or onto libc for descriptors that
// are not ours.  No call here blocks except inside a transport's
// SendMsg/RecvMsg, in the kernel's connect/accept, or in poll.
#include "base/after_fork.h"
#include "base/real_libc.h"
#include "base/user_copy_guard.h"
#include "vsocket/vsocket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "vsocket/config.h"
#include "vsocket/deferred_accept.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/live_stats.h"
#include "vsocket/path_selection.h"
#include "vsocket/poll_user_space.h"
#include "vsocket/provider_registry.h"
#include "vsocket/socket_table.h"
#include "vsocket/stats.h"
#include "vsocket/stream_io.h"
#include "vsocket/wait.h"

using vsocket::FallbackReason;
using vsocket::GetConfig;
using vsocket::LookupSocket;
using vsocket::MonotonicNs;
using vsocket::PollUserSpace;
using vsocket::Transport;
using vsocket::VirtualSocket;

namespace sys = vsocket::sys;

namespace {

// The kernel socket has IP_TRANSPARENT (or IPV6_TRANSPARENT): its accepted
// connections' local address is the client's destination, not the bound
// one.  An error reads as transparent (the cautious side).
bool IsTransparent(int fd) {
  int on = 0;
  socklen_t len = sizeof(on);
  if (sys::getsockopt(fd, SOL_IP, IP_TRANSPARENT, &on, &len) != 0) return true;
  if (on) return true;
  len = sizeof(on);
  // An IPv4 socket has no IPv6 option: ENOPROTOOPT there is a "no".
  if (sys::getsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &on, &len) != 0)
    return errno != ENOPROTOOPT && errno != EOPNOTSUPP;
  return on != 0;
}

bool IsVirtualCandidate(int domain, int type, int protocol) {
  return (domain == AF_INET || domain == AF_INET6) &&
         (type & 0xf) == SOCK_STREAM &&
         (protocol == 0 || protocol == IPPROTO_TCP);
}

// The kernel socket that carries names and options for `fd`.
int KernelFdOf(VirtualSocket* vs, int fd) {
  Transport* t = vs->TransportFinishingConnect(fd);
  return t ? t->tcp_fd() : fd;
}

int64_t TimevalToNs(const void* val, socklen_t len) {
  if (len < sizeof(struct timeval)) return -1;
  const auto* tv = static_cast<const struct timeval*>(val);
  int64_t ns = int64_t{tv->tv_sec} * 1000000000 + int64_t{tv->tv_usec} * 1000;
  return ns == 0 ? -1 : ns;  // zero means "no timeout"
}

// The data path pins the socket once per call (socket_table.h): no shared
// lock, no reference count.  `t`: the socket's connected transport.
// `checked`: the msghdr is ours and its array checked
// (IoOptions::msghdr_checked).
ssize_t SendMsgOn(VirtualSocket* vs, Transport* t, const struct msghdr* msg,
                  int flags, bool checked = false) {
  vsocket::IoOptions io = vs->SendOptions();
  io.msghdr_checked = checked;
  ssize_t n = t->SendMsg(msg, flags, io);
  if (n > 0) vs->NoteDataCall();
  return n;
}

ssize_t RecvMsgOn(VirtualSocket* vs, Transport* t, struct msghdr* msg,
                  int flags, bool checked = false) {
  vsocket::IoOptions io = vs->RecvOptions();
  io.msghdr_checked = checked;
  ssize_t n = t->RecvMsg(msg, flags, io);
  if (n > 0) vs->NoteDataCall();
  return n;
}

// The 64-bit sendmsg/recvmsg (and sendmmsg/recvmmsg) system calls refuse
// the flag the kernel uses internally for 32-bit callers, before anything
// else; send/recv (and read/write) pass it on, and TCP ignores it.  Every
// transport's SendMsg/RecvMsg is a sendmsg/recvmsg: SendBuffer/RecvBuffer
// drop the flag.
constexpr int kMsgCmsgCompat = static_cast<int>(0x80000000u);  // MSG_CMSG_COMPAT

ssize_t SendBuffer(VirtualSocket* vs, Transport* t, const void* buf,
                   size_t len, int flags) {
  flags &= ~kMsgCmsgCompat;
  struct iovec iov = {const_cast<void*>(buf), len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  return SendMsgOn(vs, t, &msg, flags, /*checked=*/true);
}

ssize_t RecvBuffer(VirtualSocket* vs, Transport* t, void* buf, size_t len,
                   int flags) {
  flags &= ~kMsgCmsgCompat;
  struct iovec iov = {buf, len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  return RecvMsgOn(vs, t, &msg, flags, /*checked=*/true);
}

// The connected transport of a pinned socket, or nullptr: not ours, or not
// connected (the kernel then answers for the descriptor's state).
// A forked child's first such call also runs the work its fork handlers
// left for after fork() (base/after_fork.h).
Transport* ConnectedTransport(const vsocket::SocketPin& vs, int fd) {
  sys::RunForkedChildWork();
  return vs ? vs->TransportFinishingConnect(fd) : nullptr;
}

// Applies O_NONBLOCK to everything that backs the socket.
void SetNonblocking(VirtualSocket* vs, int fd, bool on) {
  vs->set_nonblocking(on);
  int kernel_fd = KernelFdOf(vs, fd);
  int fl = sys::fcntl(kernel_fd, F_GETFL);
  if (fl >= 0) sys::fcntl(kernel_fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

// A non-blocking connect to a listener on this host completes within
// microseconds unless its backlog is full; to an RDMA peer whose CM just
// answered, within a round trip.  Waits at most `timeout_ms` for it.
// Returns 0 when connected, an errno value when it failed, -1 when still
// in progress.
int WaitLocalHandshake(int fd, int timeout_ms) {
  struct pollfd pfd = {fd, POLLOUT, 0};
  if (sys::poll(&pfd, 1, timeout_ms) <= 0) return -1;
  int err = 0;
  socklen_t len = sizeof(err);
  if (sys::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  // A reset means the handshake finished first (a refused one is
  // ECONNREFUSED): a preloaded server that accepted and closed at once
  // ends the liveness connection with a reset, the stream's end travels
  // in the ring (docs/PROTOCOL.md, section 4).  Kernel TCP's connect()
  // succeeded there too (EINPROGRESS, then SO_ERROR 0): so does this one,
  // and the connection reads what the peer left, then its end.
  if (err == ECONNRESET) return 0;
  return err;
}

// One buffer's length as the kernel takes it, before a transport's iovec
// checks would see it (those refuse an entry above SSIZE_MAX with EINVAL):
// send/recv/sendto/recvfrom cap it at MAX_RW_COUNT (INT_MAX rounded down
// to a page, import_ubuf), so send(fd, buf, SIZE_MAX, 0) sends what fits;
// read/write first ask access_ok(buf, len), which no length above
// SSIZE_MAX passes: EFAULT (vfs_read/vfs_write), then cap it.
size_t MaxRwCount() {
  static const size_t cap =
      size_t{INT_MAX} & ~(static_cast<size_t>(sysconf(_SC_PAGESIZE)) - 1);
  return cap;
}
size_t CapLength(size_t len) { return len < MaxRwCount() ? len : MaxRwCount(); }

bool ReadWriteLengthFaults(size_t len) { return len > SSIZE_MAX; }

// readv/writev's iovec array as a message, checked as the kernel's
// import_iovec checks it: 0 and its byte count in *total, or the errno to
// fail with (EINVAL for a count outside [0, UIO_MAXIOV]).  `msg` points at
// the caller's array; nothing is copied.
int IovArrayMessage(const struct iovec* iov, int iovcnt, bool sending,
                    struct msghdr* msg, uint64_t* total) {
  if (iovcnt < 0 || iovcnt > UIO_MAXIOV) return EINVAL;
  *msg = {};
  msg->msg_iov = const_cast<struct iovec*>(iov);
  msg->msg_iovlen = static_cast<size_t>(iovcnt);
  return vsocket::stream_io_internal::CheckIovArray(msg, sending, total);
}

// vsocket_poll's look at its kernel descriptors (no sigmask to apply).
int PollWithoutWaiting(struct pollfd* fds, nfds_t nfds, const sigset_t*) {
  return sys::poll(fds, nfds, 0);
}

}  // namespace

extern "C" {

int vsocket_socket(int domain, int type, int protocol) {
  int fd = sys::socket(domain, type, protocol);
  if (fd < 0 || !IsVirtualCandidate(domain, type, protocol)) return fd;
  RegisterSocket(fd, std::make_shared<VirtualSocket>(
                         domain, (type & SOCK_NONBLOCK) != 0));
  return fd;
}

int vsocket_bind(int fd, const struct sockaddr* addr, socklen_t len) {
  return sys::bind(fd, addr, len);
}

int vsocket_listen(int fd, int backlog) {
  auto vs = LookupSocket(fd);
  bool first = vs && vs->state() != VirtualSocket::State::kListening;
  // A provider may listen before the kernel does (RDMA: a client that finds
  // the TCP port open must also find the RDMA one, or it settles for TCP);
  // the others, and those that need the port listen() assigns, after it.
  // The live page is made now, not in the middle of an accepted
  // connection's setup, where its file and directory work would widen the
  // window in which the peer may already move the connection.
  if (first) vsocket::LiveStatsHeader();
  vsocket::ListenerAttachments attachments;
  uint32_t rule_line = 0;
  if (first)
    vsocket::AttachListeners(fd, /*kernel_listening=*/false, &attachments, &rule_line);
  if (sys::listen(fd, backlog) != 0) {
    int saved = errno;
    attachments.clear();
    errno = saved;
    return -1;
  }
  if (first) {
    vsocket::AttachListeners(fd, /*kernel_listening=*/true, &attachments, &rule_line);
    vs->set_rule_line(rule_line);
    // Accepted connections take the bound address as their local one when
    // it is a single host (saves a getsockname per connection).
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof(bound);
    auto* bound_sa = reinterpret_cast<struct sockaddr*>(&bound);
    if (sys::getsockname(fd, bound_sa, &bound_len) != 0) bound_len = 0;
    if (IsTransparent(fd)) vs->NoteTransparent();
    vs->SetListening(std::move(attachments), bound_len ? bound_sa : nullptr, bound_len);
    vsocket::HoldDeferAcceptFromKernel(vs.get(), fd);
  }
  return 0;
}

int vsocket_accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  auto vs = LookupSocket(fd);
  if (!vs || vs->state() != VirtualSocket::State::kListening)
    return sys::accept4(fd, addr, len, flags);
  // The peer's address comes with the connection: into the caller's
  // buffer if it gave one (the kernel's semantics, EFAULT included),
  // else into ours.
  vsocket::ConnectionEndpoints ends;
  int tcp_fd;
  if (addr) {
    // A bad length pointer: the kernel's accept fails with EFAULT.
    socklen_t given = 0;
    if (len) vsocket::CopyFromUser(&given, len, sizeof(given));
    tcp_fd = sys::accept4(fd, addr, len, flags);
    if (tcp_fd >= 0 && *len <= given) ends.SetPeer(addr, *len);  // not cut short
  } else {
    socklen_t peer_len = sizeof(ends.peer);
    tcp_fd = sys::accept4(fd, reinterpret_cast<struct sockaddr*>(&ends.peer), &peer_len, flags);
    if (tcp_fd >= 0) ends.peer_len = peer_len <= sizeof(ends.peer) ? peer_len : 0;
  }
  if (tcp_fd < 0) return -1;
  if (const vsocket::ConnectionEndpoints* bound = vs->listening_address())
    ends.SetLocal(bound->local_sa(), bound->local_len);
  bool nonblocking = (flags & SOCK_NONBLOCK) != 0;
  auto conn = std::make_shared<VirtualSocket>(vs->domain(), nonblocking);
  conn->InheritBufferSizes(*vs);
  conn->InheritRecvLowat(*vs);
  conn->set_accepted(true);
  conn->set_rule_line(vs->rule_line());
  std::unique_ptr<Transport> transport =
      vsocket::ClaimAccepted(vs->listeners(), tcp_fd, &ends, vs->rule_line());
  // A claimed connection's user descriptor is accepted_fd's number (its
  // flags kept), or a new one, close-on-exec.
  if (transport->user_fd() != tcp_fd && !(flags & SOCK_CLOEXEC))
    sys::fcntl(transport->user_fd(), F_SETFD, 0);
  int user_fd = transport->user_fd();
  conn->SetTransport(std::move(transport), &ends);
  RegisterSocket(user_fd, std::move(conn));
  return user_fd;
}

int vsocket_accept(int fd, struct sockaddr* addr, socklen_t* len) {
  return vsocket_accept4(fd, addr, len, 0);
}

int vsocket_connect(int fd, const struct sockaddr* addr, socklen_t len) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::connect(fd, addr, len);
  switch (vs->state()) {
    case VirtualSocket::State::kConnected: {
      // On kernel TCP the descriptor is the TCP socket: the kernel answers
      // (0 once after a non-blocking connect completed, then EISCONN).
      Transport* t = vs->TransportFinishingConnect(fd);
      if (t && (t->capabilities() & vsocket::kCapKernelStream))
        return sys::connect(fd, addr, len);
      errno = EISCONN;
      return -1;
    }
    case VirtualSocket::State::kConnecting: {
      // A pending non-blocking connect is kernel TCP underneath: the kernel
      // answers (EALREADY; 0 once after the handshake finished, then
      // EISCONN; or the failure).
      int rc = sys::connect(fd, addr, len);
      int saved = errno;
      vs->TransportFinishingConnect(fd);  // moves to kConnected once finished
      errno = saved;
      return rc;
    }
    case VirtualSocket::State::kListening:
      return sys::connect(fd, addr, len);  // the kernel's error
    case VirtualSocket::State::kFresh:
      break;
  }
  std::unique_ptr<vsocket::PendingConnection> pending;
  FallbackReason reason = FallbackReason::kPeerNotVsocket;
  vsocket::LiveStatsHeader();  // before the connection's setup: see listen
  if (addr && len >= sizeof(sa_family_t) &&
      (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
    uint32_t rule_line = 0;
    vsocket::DestinationKey destination;
    if (vsocket::MakeDestinationKey(addr, len, &destination))
      vs->set_destination(destination);
    reason = vs->zero_copy()
                 ? FallbackReason::kZeroCopy
                 : vsocket::PrepareOffer(fd, addr, len, &pending, &rule_line);
    vs->set_rule_line(rule_line);
  }
  // Until the transport is set, another thread's call on `fd` waits for
  // it rather than read the kernel socket or the wait socket.
  if (pending) vs->BeginConnect();
  int rc = sys::connect(fd, addr, len);
  if (rc != 0 && errno == EINPROGRESS && pending) {
    int outcome = WaitLocalHandshake(fd, pending->handshake_wait_ms());
    if (outcome == 0) {
      rc = 0;  // the handshake finished: report immediate success
    } else if (outcome > 0) {
      pending.reset();  // withdraw the offer first: it may change errno
      errno = outcome;  // refused etc.: report it now (SO_ERROR was read)
      return -1;
    } else {
      // Finishing later would change the object behind `fd` after the
      // application may have put it in an epoll set: stay on TCP instead.
      pending.reset();
      reason = FallbackReason::kConnectInProgress;
      errno = EINPROGRESS;
    }
  }
  if (rc != 0) {
    // The kernel's errno is the caller's.  Withdrawing a provider's offer
    // (its destructor: an RDMA channel's teardown ends with EAGAIN from its
    // non-blocking CM event channel) may change errno, so it is done here,
    // before errno is restored -- not at the return.
    int saved = errno;
    if (saved == EINPROGRESS || saved == EINTR) {
      vs->SetConnecting(std::move(pending), reason);
    } else {
      pending.reset();  // a failed connect withdraws the offer
    }
    vs->EndConnect();
    errno = saved;
    return -1;
  }
  vsocket::ConnectionEndpoints ends;
  vsocket::PeerOfConnect(addr, len, &ends);
  vs->SetTransport(vsocket::CompleteOffer(fd, std::move(pending), reason), &ends);
  return 0;
}

ssize_t vsocket_send(int fd, const void* buf, size_t len, int flags) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::send(fd, buf, len, flags);
  return SendBuffer(vs.get(), t, buf, CapLength(len), flags);
}

ssize_t vsocket_recv(int fd, void* buf, size_t len, int flags) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::recv(fd, buf, len, flags);
  return RecvBuffer(vs.get(), t, buf, CapLength(len), flags);
}

ssize_t vsocket_sendto(int fd, const void* buf, size_t len, int flags,
                       const struct sockaddr* addr, socklen_t addrlen) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::sendto(fd, buf, len, flags, addr, addrlen);
  // A connected stream socket ignores the address, as TCP does.
  return SendBuffer(vs.get(), t, buf, CapLength(len), flags);
}

ssize_t vsocket_recvfrom(int fd, void* buf, size_t len, int flags,
                         struct sockaddr* addr, socklen_t* addrlen) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::recvfrom(fd, buf, len, flags, addr, addrlen);
  ssize_t n = RecvBuffer(vs.get(), t, buf, CapLength(len), flags);
  // A connected TCP socket reports no source address: the kernel sets
  // *addrlen to 0 and leaves the buffer alone.
  if (n >= 0 && addr && addrlen) *addrlen = 0;
  return n;
}

ssize_t vsocket_sendmsg(int fd, const struct msghdr* msg, int flags) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::sendmsg(fd, msg, flags);
  if (flags & kMsgCmsgCompat) {
    errno = EINVAL;
    return -1;
  }
  return SendMsgOn(vs.get(), t, msg, flags);
}

ssize_t vsocket_recvmsg(int fd, struct msghdr* msg, int flags) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::recvmsg(fd, msg, flags);
  if (flags & kMsgCmsgCompat) {
    errno = EINVAL;
    return -1;
  }
  return RecvMsgOn(vs.get(), t, msg, flags);
}

ssize_t vsocket_read(int fd, void* buf, size_t len) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::read(fd, buf, len);
  if (ReadWriteLengthFaults(len)) {
    errno = EFAULT;
    return -1;
  }
  // A socket's read of nothing returns 0 at once (sock_read_iter, "match
  // SYS5 behaviour"); recv(fd, buf, 0, 0) instead waits as a receive does.
  if (len == 0) return 0;
  return RecvBuffer(vs.get(), t, buf, CapLength(len), 0);
}

ssize_t vsocket_write(int fd, const void* buf, size_t len) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::write(fd, buf, len);
  if (ReadWriteLengthFaults(len)) {
    errno = EFAULT;
    return -1;
  }
  return SendBuffer(vs.get(), t, buf, CapLength(len), 0);
}

ssize_t vsocket_readv(int fd, const struct iovec* iov, int iovcnt) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::readv(fd, iov, iovcnt);
  struct msghdr msg;
  uint64_t total = 0;
  if (int err = IovArrayMessage(iov, iovcnt, /*sending=*/false, &msg, &total)) {
    errno = err;
    return -1;
  }
  // vfs_readv: an array of no bytes returns 0 at once, once it passed the
  // kernel's checks (which the transport's receive would make).
  if (total == 0) return 0;
  return RecvMsgOn(vs.get(), t, &msg, 0, /*checked=*/true);
}

ssize_t vsocket_writev(int fd, const struct iovec* iov, int iovcnt) {
  auto vs = vsocket::PinSocket(fd);
  Transport* t = ConnectedTransport(vs, fd);
  if (!t) return sys::writev(fd, iov, iovcnt);
  struct msghdr msg;
  uint64_t total = 0;
  if (int err = IovArrayMessage(iov, iovcnt, /*sending=*/true, &msg, &total)) {
    errno = err;
    return -1;
  }
  // vfs_writev returns 0 for an array of no bytes without asking the
  // socket (write(fd, buf, 0) and send do ask it: EPIPE after SHUT_WR).
  if (total == 0) return 0;
  return SendMsgOn(vs.get(), t, &msg, 0, /*checked=*/true);
}

int vsocket_shutdown(int fd, int how) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::shutdown(fd, how);
  Transport* t = vs->TransportFinishingConnect(fd);
  if (!t) return sys::shutdown(fd, how);
  int rc = t->Shutdown(how);
  if (rc == 0) vs->NoteShutdown(how);
  return rc;
}

int vsocket_close(int fd) {
  // Dropping the table's reference releases the connection once no other
  // descriptor or in-flight call refers to it.
  std::shared_ptr<VirtualSocket> vs = vsocket::UnregisterSocket(fd);
  vs.reset();
  return sys::close(fd);
}

int vsocket_setsockopt(int fd, int level, int name, const void* val,
                       socklen_t len) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::setsockopt(fd, level, name, val, len);
  // Held-back sends go to the kernel first: an option such as TCP_NODELAY
  // or TCP_CORK, or a query (TCP_INFO, SIOCOUTQ below), then applies to
  // them as on kernel TCP.  One relaxed load when nothing is held.
  vsocket::BeforeWait();
  int rc = 0;
  if (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT &&
      vsocket::SetDeferAccept(vs.get(), fd, val, len, &rc))
    return rc;
  rc = sys::setsockopt(KernelFdOf(vs.get(), fd), level, name, val, len);
  if (rc == 0 && ((level == SOL_IP && name == IP_TRANSPARENT) ||
                  (level == SOL_IPV6 && name == IPV6_TRANSPARENT)))
    vs->NoteTransparent();  // whatever the value: the cautious side
  if (rc == 0 && level == IPPROTO_TCP && (name == TCP_CORK || name == TCP_NODELAY)) {
    // The kernel took it, so `val` holds a readable int: non-zero is on.
    int on = 0;
    std::memcpy(&on, val, sizeof(on));
    if (name == TCP_CORK) vs->NoteCork(on != 0);
    if (name == TCP_NODELAY && on) vs->NotePush();
  }
  if (rc == 0 && level == SOL_SOCKET) {
    if (name == SO_RCVTIMEO) vs->set_recv_timeout_ns(TimevalToNs(val, len));
    if (name == SO_SNDTIMEO) vs->set_send_timeout_ns(TimevalToNs(val, len));
    if (name == SO_SNDBUF || name == SO_SNDBUFFORCE)
      vs->NoteBufferSizesSet(Transport::kSendBufferSet);
    if (name == SO_RCVBUF || name == SO_RCVBUFFORCE)
      vs->NoteBufferSizesSet(Transport::kRecvBufferSet);
    if (name == SO_RCVLOWAT) {
      // The kernel clamps the value (0 is 1, at most half its largest
      // receive buffer): keep what it made of it.
      int lowat = 1;
      socklen_t lowat_len = sizeof(lowat);
      int saved = errno;
      if (sys::getsockopt(KernelFdOf(vs.get(), fd), SOL_SOCKET, SO_RCVLOWAT,
                          &lowat, &lowat_len) == 0)
        vs->NoteRecvLowat(lowat > 1 ? static_cast<uint32_t>(lowat) : 1);
      errno = saved;
    }
    int on = 0;
    if (name == SO_ZEROCOPY && val && len >= sizeof(int)) std::memcpy(&on, val, sizeof(int));
    if (on) vs->NoteZeroCopy();
  }
  return rc;
}

int vsocket_getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::getsockopt(fd, level, name, val, len);
  vsocket::BeforeWait();  // held-back sends first (vsocket_setsockopt)
  int rc = 0;
  if (level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT &&
      vsocket::GetDeferAccept(*vs, val, len, &rc))
    return rc;
  Transport* t = vs->TransportFinishingConnect(fd);
  // On kernel TCP too: a transport that moved there may have taken the
  // kernel's error first and hands it on (TcpTransport::AfterSwap).
  if (t && level == SOL_SOCKET && name == SO_ERROR) {
    // As sk_getsockopt: the length (EFAULT; negative: EINVAL), then the
    // error, taken once, in min(length, sizeof(int)) bytes, and the length
    // written back.
    int given = 0;
    if (len == nullptr) {
      errno = EFAULT;
      return -1;
    }
    if (!vsocket::CopyFromUser(&given, len, sizeof(given))) return -1;
    if (given < 0) {
      errno = EINVAL;
      return -1;
    }
    socklen_t n = given < static_cast<int>(sizeof(int)) ? given : sizeof(int);
    int err = t->TakeError();
    if ((n > 0 && !vsocket::CopyToUser(val, &err, n)) || !vsocket::CopyToUser(len, &n, sizeof(n))) return -1;
    return 0;
  }
  return sys::getsockopt(t ? t->tcp_fd() : fd, level, name, val, len);
}

int vsocket_getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::getsockname(fd, addr, len);
  return sys::getsockname(KernelFdOf(vs.get(), fd), addr, len);
}

int vsocket_getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::getpeername(fd, addr, len);
  return sys::getpeername(KernelFdOf(vs.get(), fd), addr, len);
}

int vsocket_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  auto vs = LookupSocket(fd);
  if (!vs) return sys::fcntl(fd, cmd, arg);
  switch (cmd) {
    case F_GETFL: {
      int fl = sys::fcntl(fd, F_GETFL);
      if (fl < 0) return fl;
      return (fl & ~O_NONBLOCK) | (vs->nonblocking() ? O_NONBLOCK : 0);
    }
    case F_SETFL:
      SetNonblocking(vs.get(), fd, (arg & O_NONBLOCK) != 0);
      return sys::fcntl(fd, F_SETFL, arg);
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      int copy = sys::fcntl(fd, cmd, arg);
      if (copy >= 0) RegisterSocket(copy, vs);
      return copy;
    }
    default:
      return sys::fcntl(fd, cmd, arg);
  }
}

int vsocket_ioctl(int fd, unsigned long request, void* arg) {
  auto vs = LookupSocket(fd);
  if (!vs) return sys::ioctl(fd, request, arg);
  vsocket::BeforeWait();  // held-back sends first (vsocket_setsockopt)
  // The two requests answered here touch the caller's int as the kernel
  // does: a bad pointer is EFAULT (NULL goes to the kernel, which says so).
  if (request == FIONBIO && arg) {
    int on;
    if (!vsocket::CopyFromUser(&on, arg, sizeof(on))) return -1;
    SetNonblocking(vs.get(), fd, on != 0);
    return 0;
  }
  Transport* t = vs->TransportFinishingConnect(fd);
  if (request == FIONREAD && t && arg) {
    int n = t->ReadableBytes();
    if (n < 0) return -1;
    return vsocket::CopyToUser(arg, &n, sizeof(n)) ? 0 : -1;
  }
  return sys::ioctl(t ? t->tcp_fd() : fd, request, arg);
}

int vsocket_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  sys::RunForkedChildWork();  // a forked child's watcher, before it sleeps
  vsocket::BeforeWait();  // corked sends of this process go out first
  // Finish the non-blocking connects the kernel completed, so that their
  // descriptors are the final ones (the only I/O here; connected sockets
  // cost a lookup).
  for (nfds_t i = 0; i < nfds; ++i) {
    auto vs = LookupSocket(fds[i].fd);
    if (vs && vs->state() == VirtualSocket::State::kConnecting)
      vs->TransportFinishingConnect(fds[i].fd);
  }
  // Fast-path connections are read from their rings first, as the
  // interposer's poll does (vsocket/poll_user_space.h); every virtual
  // socket's descriptor reports its readiness to the kernel, so the
  // kernel's poll after that is exact.
  if (GetConfig().spin_us != 0) {
    PollUserSpace user(PollWithoutWaiting);
    if (user.Begin(fds, nfds, INT_MAX)) {
      int64_t start;
      if (int ready = user.AnswerFromFirstLook(fds, nfds, &start)) return ready;
      int64_t timeout_ns = timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1000000;
      int r = user.Spin(fds, nfds, timeout_ns, nullptr, start);
      if (r != PollUserSpace::kSleep) return r;
      user.PrepareSleep();
      if (timeout_ns >= 0) {
        int64_t left = timeout_ns - (MonotonicNs() - start);
        timeout_ms = left <= 0 ? 0 : static_cast<int>((left + 999999) / 1000000);
      }
    }
  }
  if (timeout_ms != 0) vsocket::BeforeKernelWait();
  int64_t deadline = timeout_ms < 0 ? -1 : MonotonicNs() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    int ready = sys::poll(fds, nfds, timeout_ms);
    if (ready <= 0) return ready;
    // SO_RCVLOWAT: a wake-up below a connection's mark made its descriptor
    // readable; it is drained (Transport::DropStaleWakeup) and not
    // reported, and the wait goes on if nothing else was ready.
    int left = ready;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLRDNORM))) continue;
      auto vs = LookupSocket(fds[i].fd);
      if (!vs || vs->recv_lowat() <= 1) continue;
      Transport* t = vs->TransportFinishingConnect(fds[i].fd);
      int saved = errno;
      bool below = t && t->DropStaleWakeup();
      errno = saved;
      if (!below) continue;
      fds[i].revents &= ~(POLLIN | POLLRDNORM);
      if (fds[i].revents == 0) --left;
    }
    if (left > 0 || left == ready) return left;
    if (deadline >= 0) {
      int64_t rest = deadline - MonotonicNs();
      if (rest <= 0) return 0;
      timeout_ms = static_cast<int>((rest + 999999) / 1000000);
    }
  }
}

const char* vsocket_transport_name(int fd) {
  auto vs = LookupSocket(fd);
  Transport* t = vs ? vs->TransportFinishingConnect(fd) : nullptr;
  if (!t) {
    errno = EBADF;
    return nullptr;
  }
  return vsocket::TransportKindName(t->kind());
}

const char* vsocket_fallback_reason(int fd) {
  auto vs = LookupSocket(fd);
  Transport* t = vs ? vs->TransportFinishingConnect(fd) : nullptr;
  if (!t) {
    errno = EBADF;
    return nullptr;
  }
  return vsocket::FallbackReasonName(t->fallback_reason());
}

size_t vsocket_stats_json(char* buf, size_t size) {
  std::string json = vsocket::StatsJson();
  if (buf && size > 0) {
    size_t n = json.size() < size - 1 ? json.size() : size - 1;
    std::memcpy(buf, json.data(), n);
    buf[n] = '\0';
  }
  return json.size();
}

}  // extern "C"
