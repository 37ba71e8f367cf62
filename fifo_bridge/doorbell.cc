#include "fifo_bridge/doorbell.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include "base/private_fd.h"
#include "base/real_libc.h"
#include "fifo_bridge/rendezvous.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

std::atomic<int> g_wake_socket{-1};  // SetProcessWakeSocket

constexpr char kNamePrefix[] = "vsk1/";
constexpr size_t kNamePrefixLen = sizeof(kNamePrefix) - 1;

// Abstract-namespace address "\0vsk1/<key>/<role><kind>".
socklen_t MakeAddress(const std::string& key, char role, char kind,
                      struct sockaddr_un* addr) {
  return AbstractAddress(kNamePrefix + key + "/" + role + kind, addr);
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

// Sends `len` bytes from `from_fd` (-1: a socket made for this one send,
// closed after it; its datagram stays queued).
// 0 or -errno.
int SendDatagram(int from_fd, const void* data, size_t len,
                 const struct sockaddr_un& to, socklen_t to_len) {
  int temp = -1;
  if (from_fd < 0) {
    temp = sys::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (temp < 0) return -errno;
    from_fd = temp;
  }
  int rc = 0;
  for (;;) {
    ssize_t n = sys::sendto(from_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL,
                            reinterpret_cast<const struct sockaddr*>(&to), to_len);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    rc = -errno;
    break;
  }
  if (temp >= 0) sys::close(temp);
  return rc;
}

// A full queue (EAGAIN) means the target already has a wake-up queued.
int AsWakeResult(int rc) { return rc == -EAGAIN || rc == -EWOULDBLOCK ? 0 : rc; }

// Sends from this process's wake socket; when that has no room (it holds
// every connection's pending wake-ups) or does not exist, from a socket
// made for this send, so EAGAIN only ever means the target's queue is
// full.
int SendFromWakeSocket(const void* data, size_t len,
                       const struct sockaddr_un& to, socklen_t to_len) {
  int fd = ProcessWakeSocket();
  int rc = SendDatagram(fd, data, len, to, to_len);
  if (fd >= 0 && (rc == -EAGAIN || rc == -EWOULDBLOCK || rc == -ENOBUFS))
    rc = SendDatagram(-1, data, len, to, to_len);
  return rc;
}

// The payload of a server's decline (DeclineOffer): 'D', then 'U' when the
// accepting process and the client do not share memory across their users;
// wake-ups and filler carry a zero byte.
constexpr char kDeclineByte = 'D';
constexpr char kDeclineUidByte = 'U';

Doorbell::Drained DrainDatagrams(int fd) {
  // One recvmmsg takes up to kBatch wake-ups; a short batch means the queue
  // is empty, so the usual single pending wake-up costs one system call.
  constexpr unsigned kBatch = 16;
  char bufs[kBatch][8];
  struct iovec iov[kBatch];
  struct mmsghdr msgs[kBatch];
  Doorbell::Drained drained;
  for (int round = 0; round < 64; ++round) {
    std::memset(msgs, 0, sizeof(msgs));
    for (unsigned i = 0; i < kBatch; ++i) {
      iov[i] = {bufs[i], sizeof(bufs[i])};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = sys::recvmmsg(fd, msgs, kBatch, MSG_DONTWAIT, nullptr);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; ++i) {
      ++drained.datagrams;
      if (msgs[i].msg_len < 1 || msgs[i].msg_len > 2 || bufs[i][0] != kDeclineByte)
        continue;
      drained.declined = true;
      if (msgs[i].msg_len == 2 && bufs[i][1] == kDeclineUidByte)
        drained.declined_for_uid = true;
    }
    if (n < static_cast<int>(kBatch)) break;
  }
  return drained;
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

// The claim's probe socket: one unbound datagram socket per process, kept
// between claims, that each probe connect()s to another name (a datagram
// socket may be re-aimed; a refused connect leaves it as it was).  One
// system call per probe instead of three.  A thread takes it for its probe
// and puts it back; a concurrent probe makes its own.  Made in the private
// range, and dropped (not closed) once the application has closed a range
// of descriptors since it was made (base/private_fd.h: NoteRangeClosed).
// One word, so that taking it is a lock-free exchange (safe across fork):
// 0 = none, else RangeClosedCount() when made << 32 | (fd + 1).
std::atomic<uint64_t> g_probe{0};

uint32_t ClosedCount() { return static_cast<uint32_t>(sys::RangeClosedCount()); }

int TakeProbeSocket(uint32_t* made_at) {
  uint64_t word = g_probe.exchange(0, std::memory_order_acq_rel);
  *made_at = ClosedCount();
  if (word != 0 && static_cast<uint32_t>(word >> 32) == *made_at)
    return static_cast<int>(word & 0xffffffffu) - 1;
  int fd = sys::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  return fd < 0 ? -1 : sys::MovePrivate(fd);
}

void ReturnProbeSocket(int fd, uint32_t made_at) {
  if (made_at != ClosedCount()) return;  // perhaps closed meanwhile: drop
  uint64_t none = 0;
  uint64_t word = static_cast<uint64_t>(made_at) << 32 | static_cast<uint32_t>(fd + 1);
  if (!g_probe.compare_exchange_strong(none, word, std::memory_order_acq_rel))
    sys::close(fd);  // another thread's went back first
}

}  // namespace

void SetProcessWakeSocket(int fd) { g_wake_socket.store(fd, std::memory_order_release); }
int ProcessWakeSocket() { return g_wake_socket.load(std::memory_order_acquire); }

Doorbell::~Doorbell() { Close(); }

int Doorbell::Open(const std::string& key, char my_role, char peer_role) {
  my_wait_len_ = MakeAddress(key, my_role, 'A', &my_wait_addr_);
  peer_wait_len_ = MakeAddress(key, peer_role, 'A', &peer_wait_addr_);
  peer_wake_name_ = std::string(1, peer_role) + key;
  my_wake_name_ = std::string(1, my_role) + key;

  int wait_fd = BoundDatagramSocket(my_wait_addr_, my_wait_len_);
  if (wait_fd < 0) return wait_fd;
  // The smallest send buffer makes two filler datagrams enough to clear
  // POLLOUT on the wait socket.
  int one = 1;
  sys::setsockopt(wait_fd, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
  if (int rc = SetWaitSocket(wait_fd); rc != 0) {
    sys::close(wait_fd);
    return rc;
  }
  return 0;
}

int Doorbell::AdoptInherited(int wait_fd, char my_role) {
  if (my_role != 'c' && my_role != 's') return -EINVAL;
  std::string wait_name = BoundDatagramName(wait_fd);
  // "vsk1/<key>/<role>A".
  constexpr size_t kSuffix = 2;  // <role><kind>
  if (wait_name.size() <= kNamePrefixLen + 1 + kSuffix ||
      wait_name.compare(0, kNamePrefixLen, kNamePrefix) != 0 ||
      wait_name[wait_name.size() - 3] != '/' ||
      wait_name.substr(wait_name.size() - kSuffix) != std::string{my_role, 'A'}) {
    return -EINVAL;
  }
  std::string key = wait_name.substr(kNamePrefixLen, wait_name.size() - kNamePrefixLen - 3);
  char peer_role = my_role == 'c' ? 's' : 'c';
  my_wait_len_ = MakeAddress(key, my_role, 'A', &my_wait_addr_);
  peer_wait_len_ = MakeAddress(key, peer_role, 'A', &peer_wait_addr_);
  peer_wake_name_ = std::string(1, peer_role) + key;
  my_wake_name_ = std::string(1, my_role) + key;
  if (SetWaitSocket(wait_fd) != 0) return -EINVAL;
  return 0;
}

bool Doorbell::IsVsocketDatagramSocket(int fd) {
  return BoundDatagramName(fd).compare(0, kNamePrefixLen, kNamePrefix) == 0;
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
  char byte = 0;
  return AsWakeResult(SendFromWakeSocket(&byte, 1, peer_wait_addr_, peer_wait_len_));
}

int Doorbell::RingSelf() const {
  char byte = 0;
  return AsWakeResult(SendFromWakeSocket(&byte, 1, my_wait_addr_, my_wait_len_));
}

Doorbell::Drained Doorbell::DrainWakeups() const { return DrainDatagrams(wait_fd()); }

int Doorbell::DeclineOffer(const std::string& key, DeclineWhy why) {
  struct sockaddr_un to;
  socklen_t len = MakeAddress(key, 'c', 'A', &to);
  const char payload[2] = {kDeclineByte, kDeclineUidByte};
  return AsWakeResult(
      SendDatagram(-1, payload, why == DeclineWhy::kUsersDoNotShare ? 2 : 1, to, len));
}

bool Doorbell::ClientWaitSocketBound(const std::string& key) {
  struct sockaddr_un to;
  socklen_t len = MakeAddress(key, 'c', 'A', &to);
  uint32_t made_at = 0;
  int fd = TakeProbeSocket(&made_at);
  if (fd < 0) return true;  // cannot tell: the claim finds out
  int rc = sys::connect(fd, reinterpret_cast<const struct sockaddr*>(&to), len);
  int err = rc == 0 ? 0 : errno;
  // An answer no unbound datagram socket gives means the number names
  // something else by now (closed behind our back, then reused): dropped,
  // not closed, and the next probe makes a new socket.
  bool not_ours = err == EBADF || err == ENOTSOCK || err == EAFNOSUPPORT ||
                  err == EPROTOTYPE || err == EISCONN || err == EINVAL ||
                  err == EINPROGRESS || err == EALREADY;
  if (!not_ours) ReturnProbeSocket(fd, made_at);
  return rc == 0 || (err != ECONNREFUSED && err != ENOENT);
}

int Doorbell::WakePeerWatcher(pid_t peer_pid) const {
  if (peer_pid <= 0) return -ECONNREFUSED;
  struct sockaddr_un to;
  socklen_t len = AbstractAddress(WakeSocketName(peer_pid), &to);
  return SendFromWakeSocket(peer_wake_name_.data(), peer_wake_name_.size(), to, len);
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
                            reinterpret_cast<const struct sockaddr*>(&peer_wait_addr_),
                            peer_wait_len_);
    if (n < 0 && errno != EINTR) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -errno;
    }
  }
  return 0;
}

bool Doorbell::IsOurWaitSocket(int fd) const {
  struct stat st;
  return fd >= 0 && ::fstat(fd, &st) == 0 && st.st_dev == wait_dev_ &&
         st.st_ino == wait_ino_;
}

template <typename Use>
void Doorbell::WithCheckedWaitSocket(Use use) const {
  int fd = wait_fd();
  if (fd < 0) return;
  // A duplicate for this moment: the application may close its number (or
  // have it reused) at any time, and a duplicate of ours keeps the socket
  // alive while we use it.  In the private range, so the application's
  // next socket() still gets the number it expects; where that range is
  // full, the number itself, after the same check.
  int dup = sys::DupPrivate(fd);
  int checked = dup >= 0 ? dup : fd;
  if (IsOurWaitSocket(checked)) use(checked);
  if (dup >= 0) sys::close(dup);
}

Doorbell::Drained Doorbell::DrainWakeupsChecked() const {
  Drained drained;
  WithCheckedWaitSocket([&drained](int fd) { drained = DrainDatagrams(fd); });
  return drained;
}

void Doorbell::ShutdownWaitSocket(int how) const {
  WithCheckedWaitSocket([how](int fd) { sys::shutdown(fd, how); });
}

void Doorbell::Close() {
  int wait_fd = wait_fd_.exchange(-1, std::memory_order_relaxed);
  if (wait_fd >= 0) sys::close(wait_fd);
}

}  // namespace vsocket::fifo
