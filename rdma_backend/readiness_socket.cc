#include "rdma_backend/readiness_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include "base/real_libc.h"

namespace vsocket::rdma {
namespace {

// Reads every queued datagram of `fd` (non-blocking).  0 = nothing more
// can arrive (the socket was shut down for reading).
void Drain(int fd) {
  char buf[64];
  for (int i = 0; i < 4096; ++i) {
    ssize_t n = sys::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

}  // namespace

ReadinessSocket::~ReadinessSocket() {
  if (!handed_out_) CloseUserEnd();
  if (private_fd_ >= 0) sys::close(private_fd_);
  if (user_dup_ >= 0) sys::close(user_dup_);
}

void ReadinessSocket::CloseUserEnd() {
  if (user_fd_ >= 0) sys::close(user_fd_);
  user_fd_ = -1;
  if (user_dup_ >= 0) sys::close(user_dup_);
  user_dup_ = -1;
}

int ReadinessSocket::Open() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
  int one = 1;
  sys::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
  sys::NofileLimitSnapshot limit;  // one getrlimit for the three
  int user = sys::DupPrivate(sv[0]);
  int dup = user >= 0 ? sys::DupPrivate(sv[0]) : -1;
  int priv = dup >= 0 ? sys::DupPrivate(sv[1]) : -1;
  int err = errno;
  sys::close(sv[0]);
  sys::close(sv[1]);
  if (priv < 0) {
    if (user >= 0) sys::close(user);
    if (dup >= 0) sys::close(dup);
    return -err;
  }
  user_fd_ = user;
  user_dup_ = dup;
  private_fd_ = priv;
  return 0;
}

void ReadinessSocket::MoveFrom(ReadinessSocket& other) {
  user_fd_ = other.user_fd_.exchange(-1);
  user_dup_ = other.user_dup_;
  private_fd_ = other.private_fd_;
  readable_ = other.readable_;
  blocked_ = other.blocked_;
  rd_shut_ = other.rd_shut_;
  wr_shut_ = other.wr_shut_;
  handed_out_ = other.handed_out_;
  other.user_dup_ = -1;
  other.private_fd_ = -1;
}

int ReadinessSocket::TakeNumber(int fd) {
  int spare = user_fd();  // private; user_dup_ keeps the user end open
  int fd_flags = sys::fcntl(fd, F_GETFD);
  if (fd_flags < 0) return -errno;
  if (sys::ReplacePrivate(fd, spare) != 0) return -errno;
  if (sys::dup3(user_dup_, fd, (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
    int err = errno;
    // `spare` names the kernel socket now: put the user end back there.
    sys::ReplacePrivate(user_dup_, spare);
    return -err;
  }
  set_user_fd(fd);
  handed_out_ = true;
  return spare;
}

void ReadinessSocket::SetHangup(bool rdhup, bool hup) {
  if (user_dup_ < 0) return;
  if ((rdhup || hup) && !rd_shut_) {
    sys::shutdown(user_dup_, SHUT_RD);
    rd_shut_ = true;
  }
  if (hup && !wr_shut_) {
    // Writable stays true (a send must fail at once, never block): drop
    // any filler first, as the send buffer is then ours no more.
    SetWritable(true);
    sys::shutdown(user_dup_, SHUT_WR);
    wr_shut_ = true;
  }
}

void ReadinessSocket::SetReadable(bool readable) {
  if (private_fd_ < 0 || readable == readable_) return;
  if (readable) {
    char token = 'r';
    // A full queue means a token is already there: readable either way.
    sys::send(private_fd_, &token, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    Drain(user_dup_);
  }
  readable_ = readable;
}

void ReadinessSocket::SetWritable(bool writable) {
  if (private_fd_ < 0 || writable != blocked_) return;
  if (writable) {
    Drain(private_fd_);
    blocked_ = false;
    return;
  }
  // Bounded: each datagram costs several hundred bytes of a minimal
  // send buffer, so POLLOUT clears within a few sends.
  for (int i = 0; i < 64; ++i) {
    struct pollfd pfd = {user_dup_, POLLOUT, 0};
    if (sys::poll(&pfd, 1, 0) < 0 && errno != EINTR) break;
    if (!(pfd.revents & POLLOUT)) break;
    char filler = 'w';
    if (sys::send(user_dup_, &filler, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
        errno != EINTR) {
      break;
    }
  }
  blocked_ = true;
}

void ReadinessSocket::Close() {
  if (private_fd_ < 0) return;
  // Readable for good (a token), writable for good (filler drained, and
  // once the private end is closed sends fail instead of blocking).
  SetReadable(true);
  SetWritable(true);
  sys::close(private_fd_);
  private_fd_ = -1;
  if (user_dup_ >= 0) sys::close(user_dup_);
  user_dup_ = -1;
}

}  // namespace vsocket::rdma
