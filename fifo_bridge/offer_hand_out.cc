#include "fifo_bridge/offer_hand_out.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/real_libc.h"
#include "fifo_bridge/rendezvous.h"
#include "fifo_bridge/sharing_policy.h"
#include "vsocket/log.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

constexpr uint32_t kHandOutMagic = 0x4f4b5356;  // "VSKO"
constexpr uint32_t kHandOutVersion = 1;

struct HandOutMessage {
  uint32_t magic;
  uint32_t version;  // kHandOutVersion
};

socklen_t HandOutAddress(const std::string& key, struct sockaddr_un* addr) {
  return AbstractAddress("vsk1/O/" + key, addr);
}

bool PeerUid(int fd, uid_t* uid) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (sys::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *uid = cred.uid;
  return true;
}

}  // namespace

std::unique_ptr<OfferHandOut> OfferHandOut::Start(const std::string& key,
                                                  int segment_fd, int* err) {
  struct sockaddr_un addr;
  socklen_t len = HandOutAddress(key, &addr);
  int fd = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = -errno;
    return nullptr;
  }
  if (sys::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), len) != 0 ||
      sys::listen(fd, 8) != 0) {
    *err = -errno;
    sys::close(fd);
    return nullptr;
  }
  int listen_fd = sys::MovePrivate(fd);
  int segment = sys::DupPrivate(segment_fd);
  if (listen_fd < 0 || segment < 0) {
    *err = -EMFILE;
    if (listen_fd >= 0) sys::close(listen_fd);
    if (segment >= 0) sys::close(segment);
    return nullptr;
  }
  std::unique_ptr<OfferHandOut> out(new OfferHandOut(listen_fd, segment));
  WatchSink(listen_fd, out.get());
  // Connections that came before the watch would not make a new edge.
  out->OnSinkEvent();
  return out;
}

OfferHandOut::~OfferHandOut() {
  UnwatchLiveness(listen_fd_);
  sys::close(listen_fd_);
  sys::close(segment_fd_);
}

void OfferHandOut::OnSinkEvent() {
  for (int i = 0; i < 16; ++i) {
    int conn = sys::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: answered them all
    }
    uid_t uid;
    if (!PeerUid(conn, &uid) || !GetSharingPolicy().Allows(uid)) {
      VSOCKET_LOG(kInfo, "shared-memory offer: refusing a process of uid %u "
                  "(not in VSOCKET_SHARE_UIDS)", static_cast<unsigned>(uid));
      sys::close(conn);  // the asker sees end of stream: -EACCES
      continue;
    }
    if (handed_.exchange(true, std::memory_order_acq_rel)) {
      // One segment, one taker: a later asker (the acceptor's claim has
      // been made, or lost to the first asker) gets nothing.
      sys::close(conn);
      continue;
    }
    HandOutMessage message = {kHandOutMagic, kHandOutVersion};
    struct iovec iov = {&message, sizeof(message)};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &segment_fd_, sizeof(int));
    // A fresh connection's buffer takes these few bytes at once.
    if (sys::sendmsg(conn, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      VSOCKET_LOG(kDebug, "shared-memory offer: hand-out failed: %s", strerror(errno));
      handed_.store(false, std::memory_order_release);  // the asker got nothing
    }
    sys::close(conn);
  }
}

int ReceiveHandedOffer(const std::string& key, int timeout_ms, uid_t* client_uid) {
  struct sockaddr_un addr;
  socklen_t len = HandOutAddress(key, &addr);
  int fd = sys::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  struct Closer {
    int fd;
    ~Closer() { sys::close(fd); }
  } closer{fd};
  if (sys::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), len) != 0) {
    // Nobody bound it: the client made a named offer, or none.
    return (errno == ECONNREFUSED || errno == ENOENT) ? -ENOENT : -errno;
  }
  if (!PeerUid(fd, client_uid)) return -EPROTO;
  if (!GetSharingPolicy().Allows(*client_uid)) return -EACCES;
  struct pollfd pfd = {fd, POLLIN, 0};
  int r;
  do {
    r = sys::poll(&pfd, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return -ETIMEDOUT;
  if (r < 0) return -errno;
  HandOutMessage message = {};
  struct iovec iov = {&message, sizeof(message)};
  union {
    char buf[CMSG_SPACE(4 * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof(control.buf);
  ssize_t n = sys::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n == 0) return -EACCES;  // closed without an answer: refused
  if (n < 0) return -errno;
  // Take every descriptor that came, so none leaks whatever the message.
  int received = -1;
  int extra = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (received < 0) {
        received = got;
      } else {
        sys::close(got);
        ++extra;
      }
    }
  }
  bool well_formed = n == static_cast<ssize_t>(sizeof(message)) &&
                     message.magic == kHandOutMagic &&
                     message.version == kHandOutVersion && extra == 0 &&
                     !(msg.msg_flags & MSG_CTRUNC) && received >= 0;
  if (!well_formed) {
    if (received >= 0) sys::close(received);
    return -EPROTO;
  }
  return received;
}

}  // namespace vsocket::fifo
