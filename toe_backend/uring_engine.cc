#include "toe_backend/uring_engine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/real_libc.h"
#include "base/user_copy_guard.h"
#include "toe_backend/uring_ring.h"
#include "vsocket/iovec_util.h"
#include "vsocket/log.h"
#include "vsocket/stream_io.h"

namespace vsocket::toe {

// One connection or listener.  The window holds bytes peeked from `fd`:
// [0, delivered) were given to the application and are still in the
// kernel socket until discarded, [delivered, window_len) were not.
// Invariant (with `mu` released): delivered < window_len, or both are 0.
struct UringEngine::Socket {
  int fd = -1;         // written under `mu` (MoveKernelFd); sends read it without
  bool owned = false;  // made by Listen/Accept/Connect: Close closes it
  std::mutex mu;
  // window_bytes_, allocated when read-ahead starts and freed when the
  // connection goes back to plain reads with the window empty, so only
  // connections that are streaming hold one.
  char* window = nullptr;
  size_t window_len = 0;
  size_t delivered = 0;
  int kernel_readers = 0;  // threads inside recvmsg(fd): no peek meanwhile
  // An error a peek took from the socket (SO_ERROR is cleared by any
  // receive); the next call that would have seen it reports it.
  std::atomic<int> pending_error{0};
  bool readahead = false;      // the next small read may read ahead
  bool quiesced = false;       // shared with another process: never again
  // FD_CLOEXEC as last seen, and how many more switches trust it.
  bool cloexec = false;
  uint32_t recheck_after = 0;
  // A peek that found nothing (the reader keeps up with the peer: one
  // message per read) costs more than it saves: the next `skip_full` full
  // reads stay plain, `backoff` doubling (to 256) while peeks keep
  // finding nothing, back to 1 when one finds data.
  uint16_t backoff = 1;
  uint16_t skip_full = 0;

  ~Socket() { std::free(window); }
};

namespace {

ssize_t ErrnoResult(ssize_t n) { return n < 0 ? -errno : n; }

// Discards `n` bytes the application already has; true when all went.
bool DiscardSync(int fd, char* scratch, size_t n) {
  while (n > 0) {
    ssize_t d = sys::recv(fd, scratch, n, MSG_TRUNC | MSG_DONTWAIT);
    if (d <= 0) return false;
    n -= static_cast<size_t>(d);
  }
  return true;
}


}  // namespace

UringEngine::UringEngine(uint32_t readahead_bytes, uint64_t send_zc_min,
                         bool inheritable)
    : window_bytes_(readahead_bytes), send_zc_min_(send_zc_min),
      inheritable_(inheritable) {
  InstallUserCopyGuard();  // CopyFromWindow writes the caller's buffers
}

uint32_t UringEngine::capabilities() const {
  uint32_t caps = kToeKernelSocket;
  const UringSupport& s = ProbeUring();
  if (s.available && s.nowait_recv && window_bytes_ > 0)
    caps |= kToeReadAhead | kToeRecvLease;
  if (s.available && s.send_zc) caps |= kToeSendZeroCopy;
  return caps;
}

bool UringEngine::WantsZeroCopy(size_t len) const {
  return send_zc_min_ > 0 && len >= send_zc_min_ && ProbeUring().send_zc;
}

ToeHandle UringEngine::Make(int fd, bool owned) {
  auto* s = new Socket();
  s->fd = fd;
  s->owned = owned;
  return reinterpret_cast<ToeHandle>(s);
}

ToeHandle UringEngine::Adopt(int kernel_fd) { return Make(kernel_fd, false); }

ToeHandle UringEngine::Listen(const struct sockaddr* addr, socklen_t len,
                              int backlog) {
  int fd = sys::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (sys::bind(fd, addr, len) != 0 || sys::listen(fd, backlog) != 0) {
    int err = errno;
    sys::close(fd);
    return -err;
  }
  return Make(fd, true);
}

ToeHandle UringEngine::Accept(ToeHandle listener, struct sockaddr* addr,
                              socklen_t* len) {
  int fd = sys::accept4(Of(listener)->fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return -errno;
  return Make(fd, true);
}

ToeHandle UringEngine::Connect(const struct sockaddr* addr, socklen_t len) {
  int fd = sys::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (sys::connect(fd, addr, len) != 0 && errno != EINPROGRESS) {
    int err = errno;
    sys::close(fd);
    return -err;
  }
  return Make(fd, true);
}

int UringEngine::Shutdown(ToeHandle h, int how) {
  return sys::shutdown(Of(h)->fd, how) == 0 ? 0 : -errno;
}

void UringEngine::Close(ToeHandle h) {
  Socket* s = Of(h);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    DropWindow(*s);
  }
  if (s->owned) sys::close(s->fd);
  delete s;
}

void UringEngine::Quiesce(ToeHandle h) {
  Socket& s = *Of(h);
  std::lock_guard<std::mutex> lock(s.mu);
  s.quiesced = true;
  s.readahead = false;
  DropWindow(s);
}

int UringEngine::kernel_fd(ToeHandle h) const { return Of(h)->fd; }

void UringEngine::MoveKernelFd(ToeHandle h, int fd) {
  Socket& s = *Of(h);
  std::lock_guard<std::mutex> lock(s.mu);
  s.fd = fd;
}

void UringEngine::DropWindow(Socket& s) {
  if (s.delivered > 0 && !DiscardSync(s.fd, s.window, s.delivered)) {
    VSOCKET_LOG(kError, "toe: could not discard %zu delivered bytes", s.delivered);
  }
  s.window_len = 0;
  s.delivered = 0;
}

void UringEngine::NotePeek(Socket& s, bool found) {
  if (found) {
    s.backoff = 1;
    return;
  }
  s.readahead = false;
  if (s.window_len == 0) {
    std::free(s.window);
    s.window = nullptr;
  }
  s.skip_full = s.backoff;
  if (s.backoff < 256) s.backoff = static_cast<uint16_t>(s.backoff * 2);
}

bool UringEngine::MayReadAhead(Socket& s) {
  if (window_bytes_ == 0 || s.quiesced || !ProbeUring().nowait_recv) return false;
  if (s.skip_full > 0) {
    --s.skip_full;
    return false;
  }
  // Only on close-on-exec descriptors (unless told otherwise): an image
  // exec'd where the interposer cannot see it (posix_spawn) must not
  // inherit a socket whose delivered bytes are still queued.  Asked again
  // every 64 switches, so a later F_SETFD is noticed.
  if (s.recheck_after == 0) {
    int fd_flags = inheritable_ ? FD_CLOEXEC : sys::fcntl(s.fd, F_GETFD);
    s.cloexec = fd_flags >= 0 && (fd_flags & FD_CLOEXEC);
    s.recheck_after = 64;
  }
  --s.recheck_after;
  if (!s.cloexec || !ThisThreadRing()) return false;
  if (!s.window) {
    s.window = static_cast<char*>(std::malloc(window_bytes_));
    if (!s.window) return false;
  }
  return true;
}

size_t UringEngine::CopyFromWindow(Socket& s, struct msghdr* msg, size_t skip,
                                   bool peek, bool* faulted) {
  const size_t avail = s.window_len - s.delivered;
  const char* const from = s.window + s.delivered;
  size_t counted = 0;
  // Into the caller's buffers under the fault guard: a bad one delivers
  // nothing of this call (the window keeps the bytes).
  bool whole = GuardedUserCopy([&] {
    size_t copied = 0;
    size_t offset = 0;  // position in the caller's iovecs
    for (size_t i = 0; i < msg->msg_iovlen && copied < avail; ++i) {
      const struct iovec& v = msg->msg_iov[i];
      if (offset + v.iov_len <= skip) {
        offset += v.iov_len;
        continue;
      }
      size_t start = skip > offset ? skip - offset : 0;
      size_t n = std::min(v.iov_len - start, avail - copied);
      std::memcpy(static_cast<char*>(v.iov_base) + start, from + copied, n);
      copied += n;
      offset += v.iov_len;
    }
    counted = copied;
  });
  if (!whole) {
    *faulted = true;
    return 0;
  }
  const size_t copied = counted;
  if (!peek) {
    counters_.window_bytes.fetch_add(copied, std::memory_order_relaxed);
    s.delivered += copied;
    if (s.delivered == s.window_len) RefillWindow(s);
  }
  return copied;
}

void UringEngine::RefillWindow(Socket& s) {
  size_t used = s.window_len;
  struct io_uring* ring =
      (s.readahead && !s.quiesced && s.kernel_readers == 0) ? ThisThreadRing() : nullptr;
  int32_t res[2] = {-EAGAIN, -EAGAIN};
  bool ran = false;
  if (ring) {
    // One entry: discard what was delivered, then peek the next window.
    struct io_uring_sqe* discard = io_uring_get_sqe(ring);
    io_uring_prep_recv(discard, s.fd, s.window, used, MSG_TRUNC | MSG_DONTWAIT);
    discard->flags |= IOSQE_IO_LINK;
    discard->user_data = 0;
    struct io_uring_sqe* peek = io_uring_get_sqe(ring);
    io_uring_prep_recv(peek, s.fd, s.window, window_bytes_, MSG_PEEK | MSG_DONTWAIT);
    peek->user_data = 1;
    ran = SubmitAndReap(ring, 2, res) == 0;
    if (ran) counters_.readahead_enters.fetch_add(1, std::memory_order_relaxed);
  }
  s.window_len = 0;
  s.delivered = 0;
  if (!ran) {
    if (!DiscardSync(s.fd, s.window, used))
      VSOCKET_LOG(kError, "toe: could not discard %zu delivered bytes", used);
    return;
  }
  if (res[0] != static_cast<int32_t>(used)) {
    // Only another reader of the socket could cause this; never read
    // ahead on it again.
    size_t gone = res[0] > 0 ? static_cast<size_t>(res[0]) : 0;
    VSOCKET_LOG(kError, "toe: discarded %zu of %zu delivered bytes; read-ahead "
                "off for this connection", gone, used);
    DiscardSync(s.fd, s.window, used - gone);
    s.readahead = false;
    s.quiesced = true;
    return;
  }
  if (res[1] > 0) {
    s.window_len = static_cast<size_t>(res[1]);
  } else if (res[1] < 0 && res[1] != -EAGAIN && res[1] != -ECANCELED) {
    s.pending_error.store(-res[1], std::memory_order_relaxed);
  }
  NotePeek(s, res[1] > 0);
}

ssize_t UringEngine::ReceiveAndPeek(Socket& s, struct msghdr* msg, int flags) {
  struct io_uring* ring = ThisThreadRing();
  if (!ring) return ErrnoResult(sys::recvmsg(s.fd, msg, MSG_DONTWAIT | (flags & MSG_CMSG_CLOEXEC)));
  struct msghdr m = {};
  m.msg_iov = msg->msg_iov;
  m.msg_iovlen = msg->msg_iovlen;
  struct io_uring_sqe* recv = io_uring_get_sqe(ring);
  io_uring_prep_recvmsg(recv, s.fd, &m, MSG_DONTWAIT);
  recv->flags |= IOSQE_IO_LINK;
  recv->user_data = 0;
  struct io_uring_sqe* peek = io_uring_get_sqe(ring);
  io_uring_prep_recv(peek, s.fd, s.window, window_bytes_, MSG_PEEK | MSG_DONTWAIT);
  peek->user_data = 1;
  int32_t res[2] = {-EAGAIN, -EAGAIN};
  if (SubmitAndReap(ring, 2, res) != 0)
    return ErrnoResult(sys::recvmsg(s.fd, msg, MSG_DONTWAIT | (flags & MSG_CMSG_CLOEXEC)));
  counters_.readahead_enters.fetch_add(1, std::memory_order_relaxed);
  ssize_t r = res[0];
  if (res[1] > 0) {
    s.window_len = static_cast<size_t>(res[1]);
    s.delivered = 0;
  } else if (r > 0 && res[1] < 0 && res[1] != -EAGAIN && res[1] != -ECANCELED) {
    s.pending_error.store(-res[1], std::memory_order_relaxed);
  }
  // Nothing more was queued: back to plain reads for a while.
  NotePeek(s, res[1] > 0);
  if (r > 0 && !stream_io_internal::SetReceivedFields(msg, flags)) return -EFAULT;
  return r;
}

ssize_t UringEngine::Recv(ToeHandle h, struct msghdr* msg, int flags) {
  Socket& s = *Of(h);
  const uint64_t total = IovTotal(msg->msg_iov, msg->msg_iovlen);
  const bool peek = (flags & MSG_PEEK) != 0;
  const bool plain = (flags & (MSG_OOB | MSG_ERRQUEUE | MSG_TRUNC)) == 0;
  const bool wait_all = (flags & MSG_WAITALL) && !peek;
  const uint64_t small = window_bytes_ / 4;
  std::unique_lock<std::mutex> lock(s.mu);
  if (int e = s.pending_error.exchange(0, std::memory_order_relaxed)) return -e;
  size_t got = 0;
  bool faulted = false;
  if (!plain) {
    DropWindow(s);  // the kernel answers these itself
  } else if (s.window_len > s.delivered) {
    got = CopyFromWindow(s, msg, 0, peek, &faulted);
    while (!faulted && wait_all && got < total && s.window_len > s.delivered)
      got += CopyFromWindow(s, msg, got, false, &faulted);
    if (faulted && got == 0) return -EFAULT;
    if (faulted || got == total || !wait_all) {
      if (!stream_io_internal::SetReceivedFields(msg, flags)) return -EFAULT;
      return static_cast<ssize_t>(got);
    }
  } else if (s.readahead && !peek && total > 0 && total <= small &&
             s.kernel_readers == 0) {
    ssize_t r = ReceiveAndPeek(s, msg, flags);
    if (r == 0 || (r < 0 && r != -EAGAIN)) return r;
    if (r > 0) {
      got = static_cast<size_t>(r);
      while (!faulted && wait_all && got < total && s.window_len > s.delivered)
        got += CopyFromWindow(s, msg, got, false, &faulted);
      if (faulted || got == total || !wait_all) return static_cast<ssize_t>(got);
    } else if (flags & MSG_DONTWAIT) {
      return -EAGAIN;
    }
  }
  // The kernel socket, as kernel TCP: the window is empty here.  With
  // SQPOLL the SQ thread answers what needs no waiting.
  ssize_t n = -EAGAIN;
  if (got > 0 || !plain || (flags & MSG_WAITALL) || !RecvOnSqThread(s, msg, flags, &n)) {
    // No peek may start while this thread is inside recvmsg.
    std::vector<struct iovec> rest;
    struct msghdr tail = {};
    struct msghdr* m = msg;
    if (got > 0) {
      rest = IovSuffix(msg->msg_iov, msg->msg_iovlen, got);
      tail.msg_iov = rest.data();
      tail.msg_iovlen = rest.size();
      m = &tail;
    }
    ++s.kernel_readers;
    const int fd = s.fd;
    lock.unlock();
    n = ErrnoResult(sys::recvmsg(fd, m, flags));
    lock.lock();
    --s.kernel_readers;
    if (got > 0) {
      if (!stream_io_internal::SetReceivedFields(msg, flags)) return -EFAULT;
      return static_cast<ssize_t>(got) + (n > 0 ? n : 0);
    }
  }
  // A small read that filled its buffer: more is probably queued.
  if (plain && !peek && n > 0 && static_cast<uint64_t>(n) == total &&
      total <= small && !s.readahead && MayReadAhead(s)) {
    s.readahead = true;
  }
  return n;
}

ssize_t UringEngine::Send(ToeHandle h, const struct msghdr* msg, int flags) {
  Socket& s = *Of(h);
  if (int e = s.pending_error.exchange(0, std::memory_order_relaxed)) return -e;
  if (struct io_uring* ring = ThisThreadSqpollRing()) return SendOnSqThread(s, ring, msg, flags);
  return ErrnoResult(sys::sendmsg(s.fd, msg, flags));
}

bool UringEngine::RecvOnSqThread(Socket& s, struct msghdr* msg, int flags, ssize_t* n) {
  struct io_uring* ring = ThisThreadSqpollRing();
  if (!ring) return false;
  struct msghdr m = {};
  m.msg_iov = msg->msg_iov;
  m.msg_iovlen = msg->msg_iovlen;
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  io_uring_prep_recvmsg(sqe, s.fd, &m, flags | MSG_DONTWAIT);
  sqe->user_data = 0;
  int32_t res[1] = {-EAGAIN};
  if (SubmitAndReap(ring, 1, res) != 0) return false;
  counters_.sqpoll_calls.fetch_add(1, std::memory_order_relaxed);
  if (res[0] == -EAGAIN && !(flags & MSG_DONTWAIT)) return false;
  *n = res[0];
  if (*n > 0 && !stream_io_internal::SetReceivedFields(msg, flags)) *n = -EFAULT;
  return true;
}

ssize_t UringEngine::SendOnSqThread(Socket& s, struct io_uring* ring,
                                    const struct msghdr* msg, int flags) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  // MSG_NOSIGNAL: the kernel would raise SIGPIPE on the SQ thread.
  io_uring_prep_sendmsg(sqe, s.fd, msg, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
  sqe->user_data = 0;
  int32_t res[1] = {-EAGAIN};
  if (SubmitAndReap(ring, 1, res) != 0) return ErrnoResult(sys::sendmsg(s.fd, msg, flags));
  counters_.sqpoll_calls.fetch_add(1, std::memory_order_relaxed);
  const ssize_t n = res[0];
  if (n == -EPIPE && !(flags & MSG_NOSIGNAL)) pthread_kill(pthread_self(), SIGPIPE);
  if ((flags & MSG_DONTWAIT) || (n < 0 && n != -EAGAIN)) return n;
  // A caller that may block: what the send buffer could not take at once
  // goes as kernel TCP would send it (blocking, SO_SNDTIMEO, signals).
  if (n == -EAGAIN) return ErrnoResult(sys::sendmsg(s.fd, msg, flags));
  const uint64_t total = IovTotal(msg->msg_iov, msg->msg_iovlen);
  if (static_cast<uint64_t>(n) == total) return n;
  std::vector<struct iovec> rest = IovSuffix(msg->msg_iov, msg->msg_iovlen,
                                             static_cast<size_t>(n));
  struct msghdr tail = *msg;
  tail.msg_iov = rest.data();
  tail.msg_iovlen = rest.size();
  // An error after some bytes went is the next call's, as in the kernel
  // (which raises no SIGPIPE for a send that took bytes).
  ssize_t more = sys::sendmsg(s.fd, &tail, flags | MSG_NOSIGNAL);
  return n + (more > 0 ? more : 0);
}

void UringEngine::SendBatch(const ToeHandle* handles, const struct msghdr* msgs,
                            int n, ssize_t* results) {
  constexpr int kPerEnter = 8;  // the ring's size (uring_ring.cc)
  struct io_uring* ring = n > 1 ? ThisThreadRing() : nullptr;
  for (int base = 0; base < n; base += kPerEnter) {
    const int count = std::min(n - base, kPerEnter);
    int32_t res[kPerEnter];
    bool batched = ring != nullptr && count > 1;
    if (batched) {
      for (int i = 0; i < count; ++i) {
        struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
        io_uring_prep_sendmsg(sqe, Of(handles[base + i])->fd, &msgs[base + i],
                              MSG_DONTWAIT | MSG_NOSIGNAL);
        sqe->user_data = static_cast<uint64_t>(i);
        res[i] = -EAGAIN;
      }
      batched = SubmitAndReap(ring, count, res) == 0;
      if (batched) counters_.batch_enters.fetch_add(1, std::memory_order_relaxed);
    }
    for (int i = 0; i < count; ++i) {
      results[base + i] =
          batched ? res[i]
                  : ErrnoResult(sys::sendmsg(Of(handles[base + i])->fd, &msgs[base + i],
                                             MSG_DONTWAIT | MSG_NOSIGNAL));
    }
  }
}

ssize_t UringEngine::SendZeroCopy(ToeHandle h, const void* data, size_t len,
                                  int flags, uint64_t cookie) {
  Socket& s = *Of(h);
  struct io_uring* ring = ProbeUring().send_zc ? ThisThreadRing() : nullptr;
  if (!ring) return -EOPNOTSUPP;
  if (int e = s.pending_error.exchange(0, std::memory_order_relaxed)) return -e;
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  io_uring_prep_send_zc(sqe, s.fd, data, len, flags | MSG_DONTWAIT | MSG_NOSIGNAL, 0);
  sqe->user_data = 0 | kZeroCopyBit;
  int32_t res[1] = {-EAGAIN};
  int rc = SubmitAndReap(ring, 1, res);
  if (rc != 0) return rc;
  counters_.zerocopy_sends.fetch_add(1, std::memory_order_relaxed);
  // SubmitAndReap waited for the notification: the kernel is done with
  // `data`.
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    send_done_.push_back(cookie);
  }
  return res[0];
}

int UringEngine::TakeSendDone(uint64_t* cookies, int max) {
  std::lock_guard<std::mutex> lock(done_mu_);
  int n = static_cast<int>(std::min<size_t>(send_done_.size(), static_cast<size_t>(max)));
  std::copy(send_done_.begin(), send_done_.begin() + n, cookies);
  send_done_.erase(send_done_.begin(), send_done_.begin() + n);
  return n;
}

ssize_t UringEngine::RecvLease(ToeHandle h, size_t max, ToeLease* lease) {
  Socket& s = *Of(h);
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.window_len == s.delivered) {
    if (s.kernel_readers > 0 || !MayReadAhead(s)) return -EOPNOTSUPP;
    ssize_t p = ErrnoResult(sys::recv(s.fd, s.window, window_bytes_, MSG_PEEK | MSG_DONTWAIT));
    if (p <= 0) return p;
    s.window_len = static_cast<size_t>(p);
    s.delivered = 0;
  }
  lease->data = s.window + s.delivered;
  lease->len = std::min(max, s.window_len - s.delivered);
  return static_cast<ssize_t>(lease->len);
}

int UringEngine::ReleaseLease(ToeHandle h, size_t consumed) {
  Socket& s = *Of(h);
  std::lock_guard<std::mutex> lock(s.mu);
  if (consumed > s.window_len - s.delivered) return -EINVAL;
  s.delivered += consumed;
  if (s.window_len > 0 && s.delivered == s.window_len) RefillWindow(s);
  return 0;
}

uint32_t UringEngine::Events(ToeHandle h) {
  Socket& s = *Of(h);
  struct pollfd p = {s.fd, POLLIN | POLLOUT | POLLRDHUP, 0};
  if (sys::poll(&p, 1, 0) < 0) return kToeError;
  uint32_t ev = 0;
  if (p.revents & POLLIN) ev |= kToeReadable;
  if (p.revents & POLLOUT) ev |= kToeWritable;
  if (p.revents & (POLLRDHUP | POLLHUP)) ev |= kToeReadHangup;
  if (p.revents & POLLERR) ev |= kToeError;
  if (s.pending_error.load(std::memory_order_relaxed)) ev |= kToeError | kToeReadable;
  return ev;
}

int UringEngine::ReadableBytes(ToeHandle h) {
  Socket& s = *Of(h);
  std::lock_guard<std::mutex> lock(s.mu);
  int n = 0;
  if (sys::ioctl(s.fd, FIONREAD, &n) != 0) return -errno;
  return n - static_cast<int>(std::min<size_t>(s.delivered, static_cast<size_t>(n)));
}

int UringEngine::TakeError(ToeHandle h) {
  Socket& s = *Of(h);
  if (int e = s.pending_error.exchange(0, std::memory_order_relaxed)) return e;
  int err = 0;
  socklen_t len = sizeof(err);
  if (sys::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

}  // namespace vsocket::toe
