// sendfile, sendfile64, splice.
//
// A connection whose transport streams through its descriptor
// (kCapKernelStream: kernel TCP) goes to the kernel unchanged (zero copy).
// Any other connection's descriptor only signals readiness (a wait socket
// or readiness socket) and its bytes live in the transport's memory, which
// the kernel cannot splice: the data goes through a bounce buffer instead,
// with the kernel's argument checks and error numbers (EINVAL, ESPIPE)
// kept.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "preload/preload_internal.h"
#include "preload/real_calls.h"
#include "base/real_libc.h"
#include "vsocket/stats.h"
#include "vsocket/virtual_socket.h"
#include "vsocket/vsocket.h"

namespace sys = vsocket::sys;
namespace real = vsocket::preload::real;
using vsocket::preload::Ours;
using vsocket::TransportKind;

namespace {

constexpr size_t kBounceBytes = 64 * 1024;
constexpr size_t kMaxRwCount = 0x7ffff000;  // the kernel's MAX_RW_COUNT

enum class Path { kPlain, kTcp, kUserStream };

// kUserStream: a connected virtual socket whose data is not on its
// descriptor (any transport without kCapKernelStream).  kTcp: a
// connected one on kernel TCP (the descriptor is the TCP socket).  kPlain:
// anything else, which the kernel handles (and rejects) itself.
Path PathOf(int fd) {
  if (!Ours(fd)) return Path::kPlain;
  auto vs = vsocket::LookupSocket(fd);
  if (!vs || vs->state() != vsocket::VirtualSocket::State::kConnected)
    return Path::kPlain;
  vsocket::Transport* t = vs->TransportFinishingConnect(fd);
  if (!t) return Path::kPlain;
  // Any other transport's descriptor is a readiness socket: bounce.
  return (t->capabilities() & vsocket::kCapKernelStream) ? Path::kTcp : Path::kUserStream;
}

bool IsPipe(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using Bounce = std::unique_ptr<char, FreeDeleter>;

Bounce NewBounce() { return Bounce(static_cast<char*>(std::malloc(kBounceBytes))); }

void CountKernelBytes(Path in, Path out, ssize_t n) {
  if (n <= 0) return;
  if (out == Path::kTcp) vsocket::StatsBytesSent(TransportKind::kTcp, n);
  if (in == Path::kTcp) vsocket::StatsBytesReceived(TransportKind::kTcp, n);
}

// Shared-memory socket -> pipe.  Peeks at most what the pipe can take, writes
// it, then consumes exactly what the pipe accepted: nothing is lost when the
// pipe is full or the call is interrupted.  As in the kernel, the socket
// blocks unless it is O_NONBLOCK; `pipe_nonblock` (SPLICE_F_NONBLOCK, or an
// O_NONBLOCK pipe for sendfile) only makes a full pipe fail with EAGAIN.
ssize_t SocketToPipe(int sock, int pipe_w, size_t len, bool pipe_nonblock) {
  if (len == 0) return 0;
  size_t room = kBounceBytes;
  for (;;) {
    int capacity = sys::fcntl(pipe_w, F_GETPIPE_SZ);
    int queued = 0;
    if (capacity > 0 && sys::ioctl(pipe_w, FIONREAD, &queued) == 0) {
      room = capacity > queued ? static_cast<size_t>(capacity - queued) : 0;
    }
    if (room > 0) break;
    if (pipe_nonblock) {
      errno = EAGAIN;
      return -1;
    }
    struct pollfd pfd = {pipe_w, POLLOUT, 0};
    if (sys::poll(&pfd, 1, -1) < 0) return -1;  // EINTR as the kernel would
    if (pfd.revents & (POLLERR | POLLNVAL)) break;  // let write() report it
  }
  Bounce buf = NewBounce();
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  size_t want = std::min({len, room, kBounceBytes});
  ssize_t n = vsocket_recv(sock, buf.get(), want, MSG_PEEK);
  if (n <= 0) return n;
  ssize_t written = sys::write(pipe_w, buf.get(), static_cast<size_t>(n));
  if (written <= 0) return written;
  int saved = errno;
  vsocket_recv(sock, buf.get(), static_cast<size_t>(written), MSG_DONTWAIT);
  errno = saved;
  return written;
}

// Pipe -> a kUserStream socket.  tee() copies the pipe's data without
// consuming it; only what the socket accepted is then taken from the pipe.
// `pipe_nonblock` (SPLICE_F_NONBLOCK): an empty pipe fails with EAGAIN; the
// socket blocks unless it is O_NONBLOCK.
ssize_t PipeToSocket(int pipe_r, int sock, size_t len, bool pipe_nonblock) {
  if (len == 0) return 0;
  int scratch[2];
  if (::pipe2(scratch, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  ssize_t copied = ::tee(pipe_r, scratch[1], std::min(len, kBounceBytes),
                         pipe_nonblock ? SPLICE_F_NONBLOCK : 0);
  Bounce buf = copied > 0 ? NewBounce() : nullptr;
  ssize_t got = -1;
  int saved = errno;
  if (buf) got = sys::read(scratch[0], buf.get(), static_cast<size_t>(copied));
  sys::close(scratch[0]);
  sys::close(scratch[1]);
  if (copied <= 0) {
    errno = saved;
    return copied;  // 0: no writer and nothing queued
  }
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  if (got <= 0) return -1;
  ssize_t sent = vsocket_send(sock, buf.get(), static_cast<size_t>(got), 0);
  if (sent <= 0) return sent;
  saved = errno;
  sys::read(pipe_r, buf.get(), static_cast<size_t>(sent));
  errno = saved;
  return sent;
}

// Regular file -> a kUserStream socket, from *offset (advanced) or from the
// file position (advanced), as sendfile(2) does.
ssize_t FileToSocket(int sock, int in_fd, off_t* offset, size_t count) {
  struct stat st;
  if (::fstat(in_fd, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    errno = EINVAL;
    return -1;
  }
  int fl = sys::fcntl(in_fd, F_GETFL);
  if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY) {
    errno = EBADF;
    return -1;
  }
  off_t pos = offset ? *offset : ::lseek(in_fd, 0, SEEK_CUR);
  if (pos < 0) {
    if (offset) errno = EINVAL;
    return -1;
  }
  count = std::min(count, kMaxRwCount);
  if (count == 0) return 0;
  Bounce buf = NewBounce();
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  size_t total = 0;
  int err = 0;
  while (total < count) {
    size_t chunk = std::min(count - total, kBounceBytes);
    ssize_t r = ::pread(in_fd, buf.get(), chunk, pos + static_cast<off_t>(total));
    if (r < 0) {
      if (errno == EINTR && total == 0) continue;
      err = errno;
      break;
    }
    if (r == 0) break;  // end of file
    ssize_t s = vsocket_send(sock, buf.get(), static_cast<size_t>(r), 0);
    if (s < 0) {
      err = errno;
      break;
    }
    total += static_cast<size_t>(s);
    if (s < r) break;  // non-blocking, timeout or signal: report what went
  }
  off_t end = pos + static_cast<off_t>(total);
  if (offset) {
    *offset = end;
  } else {
    ::lseek(in_fd, end, SEEK_SET);
  }
  if (total == 0 && err != 0) {
    errno = err;
    return -1;
  }
  return static_cast<ssize_t>(total);
}

ssize_t Sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  Path out = PathOf(out_fd), in = PathOf(in_fd);
  if (in == Path::kUserStream) {
    // The kernel reads from a socket only into a pipe (Linux 5.12+).
    if (!IsPipe(out_fd)) {
      errno = EINVAL;
      return -1;
    }
    if (offset) {
      errno = ESPIPE;
      return -1;
    }
    int fl = sys::fcntl(out_fd, F_GETFL);
    return SocketToPipe(in_fd, out_fd, count, fl >= 0 && (fl & O_NONBLOCK));
  }
  if (out == Path::kUserStream) return FileToSocket(out_fd, in_fd, offset, count);
  ssize_t n = real::sendfile(out_fd, in_fd, offset, count);
  CountKernelBytes(in, out, n);
  return n;
}

}  // namespace

VSP_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset,
                            size_t count) __THROW {
  if (!Ours(out_fd) && !Ours(in_fd))
    return real::sendfile(out_fd, in_fd, offset, count);
  return Sendfile(out_fd, in_fd, offset, count);
}

// off_t is 64 bits on every target vsocket builds for (LP64).
static_assert(sizeof(off_t) == sizeof(off64_t));

VSP_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset,
                              size_t count) __THROW {
  return sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
}

VSP_EXPORT ssize_t splice(int fd_in, off64_t* off_in, int fd_out,
                          off64_t* off_out, size_t len, unsigned int flags) {
  auto* oin = reinterpret_cast<off_t*>(off_in);
  auto* oout = reinterpret_cast<off_t*>(off_out);
  if (!Ours(fd_in) && !Ours(fd_out))
    return real::splice(fd_in, oin, fd_out, oout, len, flags);
  Path in = PathOf(fd_in), out = PathOf(fd_out);
  if (in != Path::kUserStream && out != Path::kUserStream) {
    ssize_t n = real::splice(fd_in, oin, fd_out, oout, len, flags);
    CountKernelBytes(in, out, n);
    return n;
  }
  bool nonblock = flags & SPLICE_F_NONBLOCK;
  if (in == Path::kUserStream) {
    // socket -> pipe; the checks in the kernel's order.
    if (!IsPipe(fd_out)) {
      errno = EINVAL;
      return -1;
    }
    if (off_out) {
      errno = ESPIPE;
      return -1;
    }
    if (off_in) {
      errno = EINVAL;
      return -1;
    }
    return SocketToPipe(fd_in, fd_out, len, nonblock);
  }
  // pipe -> socket
  if (!IsPipe(fd_in)) {
    errno = EINVAL;
    return -1;
  }
  if (off_in) {
    errno = ESPIPE;
    return -1;
  }
  if (off_out) {
    errno = EINVAL;
    return -1;
  }
  return PipeToSocket(fd_in, fd_out, len, nonblock);
}
