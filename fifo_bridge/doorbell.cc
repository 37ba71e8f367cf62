#include "fifo_bridge/doorbell.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <unistd.h>

#include <cstring>
#include "base/real_libc.h"
#include "fifo_bridge/rendezvous.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

// Abstract-namespace address "\0vsk1/<key>/<role><kind>".
socklen_t MakeAddress(const std::string& key, char role, char kind,
                      struct sockaddr_un* addr) {
  return AbstractAddress("vsk1/" + key + "/" + role + kind, addr);
}

int BoundDatagramSocket(const struct sockaddr_un& addr, socklen_t len) {
  int fd = sys::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (sys::bind(fd, reinterpret_cast<const struct sockaddr*>(&addr), len) != 0) {
    int err = errno;
    sys::close(fd);
    return -err;
  }
  return fd;
}

int SendWake(int from_fd, const struct sockaddr_un& to, socklen_t len) {
  char byte = 0;
  for (;;) {
    ssize_t n = sys::sendto(from_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                         reinterpret_cast<const struct sockaddr*>(&to), len);
    if (n == 1) return 0;
    if (errno == EINTR) continue;
    // Queue full (EAGAIN) means the target already has a wake-up queued.
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

void DrainDatagrams(int fd) {
  // One recvmmsg takes up to kBatch wake-ups; a short batch means the queue
  // is empty, so the usual single pending wake-up costs one system call.
  constexpr unsigned kBatch = 16;
  char bufs[kBatch][8];
  struct iovec iov[kBatch];
  struct mmsghdr msgs[kBatch];
  std::memset(msgs, 0, sizeof(msgs));
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {bufs[i], sizeof(bufs[i])};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  for (int round = 0; round < 64; ++round) {
    int n = sys::recvmmsg(fd, msgs, kBatch, MSG_DONTWAIT, nullptr);
    if (n < 0 && errno == EINTR) continue;
    if (n < static_cast<int>(kBatch)) return;
  }
}

// The abstract name `fd` is bound to, without the leading NUL, if it is a
// Unix datagram socket; "" otherwise.
std::string BoundDatagramName(int fd) {
  int type = 0;
  socklen_t type_len = sizeof(type);
  struct sockaddr_un addr {};
  socklen_t len = sizeof(addr);
  if (sys::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 ||
      type != SOCK_DGRAM ||
      sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0 ||
      addr.sun_family != AF_UNIX) {
    return "";
  }
  size_t path_len = len > offsetof(struct sockaddr_un, sun_path)
                        ? len - offsetof(struct sockaddr_un, sun_path)
                        : 0;
  if (path_len < 2 || addr.sun_path[0] != '\0') return "";
  return std::string(addr.sun_path + 1, path_len - 1);
}

}  // namespace

Doorbell::~Doorbell() { Close(); }

int Doorbell::Open(const std::string& key, char my_role, char peer_role) {
  struct sockaddr_un my_sink {};
  socklen_t my_sink_len = MakeAddress(key, my_role, 'K', &my_sink);
  my_wait_len_ = MakeAddress(key, my_role, 'A', &my_wait_addr_);
  peer_wait_len_ = MakeAddress(key, peer_role, 'A', &peer_wait_addr_);
  peer_sink_len_ = MakeAddress(key, peer_role, 'K', &peer_sink_addr_);

  int wait_fd = BoundDatagramSocket(my_wait_addr_, my_wait_len_);
  if (wait_fd < 0) return wait_fd;
  int sink_fd = BoundDatagramSocket(my_sink, my_sink_len);
  if (sink_fd < 0) {
    sys::close(wait_fd);
    return sink_fd;
  }
  // The smallest send buffer makes two filler datagrams enough to clear
  // POLLOUT on the wait socket.
  int one = 1;
  sys::setsockopt(wait_fd, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
  if (int rc = SetWaitSocket(wait_fd); rc != 0) {
    sys::close(wait_fd);
    sys::close(sink_fd);
    return rc;
  }
  sink_fd_ = sys::MovePrivate(sink_fd);
  return 0;
}

int Doorbell::AdoptInherited(int wait_fd, int sink_fd, char my_role) {
  if (my_role != 'c' && my_role != 's') return -EINVAL;
  std::string wait_name = BoundDatagramName(wait_fd);
  std::string sink_name = BoundDatagramName(sink_fd);
  // "vsk1/<key>/<role><kind>": the same "vsk1/<key>/" prefix on both.
  constexpr size_t kSuffix = 2;  // <role><kind>
  if (wait_name.size() <= 5 + kSuffix || wait_name.size() != sink_name.size() ||
      wait_name.compare(0, 5, "vsk1/") != 0 ||
      wait_name.compare(0, wait_name.size() - kSuffix, sink_name, 0,
                        sink_name.size() - kSuffix) != 0 ||
      wait_name[wait_name.size() - 3] != '/' ||
      wait_name.substr(wait_name.size() - kSuffix) != std::string{my_role, 'A'} ||
      sink_name.substr(sink_name.size() - kSuffix) != std::string{my_role, 'K'}) {
    return -EINVAL;
  }
  std::string key = wait_name.substr(5, wait_name.size() - 5 - 3);
  char peer_role = my_role == 'c' ? 's' : 'c';
  my_wait_len_ = MakeAddress(key, my_role, 'A', &my_wait_addr_);
  peer_wait_len_ = MakeAddress(key, peer_role, 'A', &peer_wait_addr_);
  peer_sink_len_ = MakeAddress(key, peer_role, 'K', &peer_sink_addr_);
  if (SetWaitSocket(wait_fd) != 0) return -EINVAL;
  sink_fd_ = sink_fd;
  return 0;
}

int Doorbell::SetWaitSocket(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return -errno;
  wait_dev_ = st.st_dev;
  wait_ino_ = st.st_ino;
  wait_fd_.store(fd, std::memory_order_relaxed);
  return 0;
}

int Doorbell::RingPeer() const {
  return SendWake(sink_fd_, peer_wait_addr_, peer_wait_len_);
}

int Doorbell::RingSelf() const {
  return SendWake(sink_fd_, my_wait_addr_, my_wait_len_);
}

void Doorbell::DrainWakeups() const { DrainDatagrams(wait_fd()); }

int Doorbell::DeclineOffer(const std::string& key) {
  struct sockaddr_un to;
  socklen_t len = MakeAddress(key, 'c', 'K', &to);
  int fd = sys::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int rc = SendWake(fd, to, len);
  sys::close(fd);
  return rc;
}

int Doorbell::WakePeerWatcher() const {
  return SendWake(sink_fd_, peer_sink_addr_, peer_sink_len_);
}

int Doorbell::FillSendBuffer() const {
  // Bounded: a datagram's true size is several hundred bytes against a
  // send buffer of a few KiB, so this ends within a handful of iterations.
  for (int i = 0; i < 64; ++i) {
    int wait_fd = wait_fd_.load(std::memory_order_relaxed);
    struct pollfd pfd = {wait_fd, POLLOUT, 0};
    if (sys::poll(&pfd, 1, 0) < 0 && errno != EINTR) return -errno;
    if (!(pfd.revents & POLLOUT)) return 0;
    char byte = 0;
    ssize_t n = sys::sendto(wait_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                         reinterpret_cast<const struct sockaddr*>(&peer_sink_addr_),
                         peer_sink_len_);
    if (n < 0 && errno != EINTR) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -errno;
    }
  }
  return 0;
}

void Doorbell::DrainSink() const { DrainDatagrams(sink_fd_); }

void Doorbell::ShutdownWaitSocket(int how) const {
  int fd = wait_fd();
  if (fd < 0) return;
  // A duplicate for this moment: the application may close its number (or
  // have it reused) at any time, and a duplicate of ours keeps the socket
  // alive while we use it.  In the private range, so the application's
  // next socket() still gets the number it expects; where that range is
  // full, the number itself, after the same check.
  int dup = sys::DupPrivate(fd);
  int use = dup >= 0 ? dup : fd;
  struct stat st;
  if (::fstat(use, &st) == 0 && st.st_dev == wait_dev_ && st.st_ino == wait_ino_)
    sys::shutdown(use, how);
  if (dup >= 0) sys::close(dup);
}

void Doorbell::Close() {
  int wait_fd = wait_fd_.exchange(-1, std::memory_order_relaxed);
  if (wait_fd >= 0) sys::close(wait_fd);
  if (sink_fd_ >= 0) sys::close(sink_fd_);
  sink_fd_ = -1;
}

}  // namespace vsocket::fifo
