#include "toe_backend/send_cork.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/private_fd.h"
#include "base/real_libc.h"
#include "base/user_copy_guard.h"
#include "toe_backend/cork_list.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::toe {
namespace {

uint64_t InodeOf(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

SendCork::SendCork(ToeEngine* engine, ToeHandle handle, int fd, uint32_t cork_max)
    : engine_(engine), handle_(handle), max_(cork_max),
      small_max_(std::max<uint32_t>(cork_max / 4, 1)), fd_(fd) {
  InstallUserCopyGuard();  // Append copies the caller's bytes
}

SendCork::~SendCork() { std::free(buf_); }

SendCork::Outcome SendCork::Send(const struct msghdr* msg, size_t total, int flags,
                                 bool nonblocking, ssize_t* n) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = MonotonicNs();
  const uint64_t epoch = WaitEpoch();
  const bool after_send = last_was_send_ && now - last_send_ns_ < kRunGapNs &&
                          epoch == last_send_epoch_;
  last_was_send_ = true;
  last_send_ns_ = now;
  last_send_epoch_ = epoch;
  if (error_ != 0) {
    *n = ReportError(flags);
    return Outcome::kDone;
  }
  const bool small = total > 0 && total <= small_max_ && !(flags & MSG_OOB);
  if (small && !detached_ && (after_send || (flags & MSG_MORE)) && len_ + total <= max_) {
    if (!buf_) buf_ = static_cast<char*>(std::malloc(max_));
    if (buf_) {
      const bool was_empty = len_ == 0;
      if (!Append(msg, total)) {
        errno = EFAULT;  // a buffer the process cannot read: nothing held
        *n = -1;
        return Outcome::kDone;
      }
      GetCorkCounters().corked_sends.fetch_add(1, std::memory_order_relaxed);
      if (was_empty) {
        held_since_tick_ = CurrentTick();
        if (ino_ == 0) ino_ = InodeOf(fd_);
        ListCorked(shared_from_this(), engine_);
      }
      *n = static_cast<ssize_t>(total);
      return Outcome::kDone;
    }
  }
  if (len_ == 0) return Outcome::kSendDirect;

  // Held bytes first, then this send, in one system call where the kernel
  // takes both.  IOV_MAX bounds the vector: a send with that many pieces
  // waits for the held bytes to go alone.
  const size_t pieces = msg->msg_iovlen < IOV_MAX ? msg->msg_iovlen : 0;
  std::vector<struct iovec> iov(1 + pieces);
  iov[0] = {buf_ + off_, len_};
  for (size_t i = 0; i < pieces; ++i) iov[1 + i] = msg->msg_iov[i];
  struct msghdr m = {};
  m.msg_iov = iov.data();
  m.msg_iovlen = iov.size();
  ssize_t r = sys::sendmsg(fd_, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  GetCorkCounters().flushes.fetch_add(1, std::memory_order_relaxed);
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) {
      if (nonblocking) {
        errno = EAGAIN;
        *n = -1;
        return Outcome::kDone;
      }
      return Outcome::kWouldBlock;
    }
    DropHeld();
    error_ = errno;
    *n = ReportError(flags);
    return Outcome::kDone;
  }
  const size_t sent = static_cast<size_t>(r);
  if (sent < len_) {
    Consume(sent);
    if (nonblocking) {
      errno = EAGAIN;
      *n = -1;
      return Outcome::kDone;
    }
    return Outcome::kWouldBlock;
  }
  const size_t of_this = sent - len_;
  Consume(len_);
  if (pieces == 0 || of_this == 0) {
    // The kernel took the held bytes only: this send goes by itself (and
    // waits, or reports EAGAIN, as the kernel decides).
    return Outcome::kSendDirect;
  }
  // Part of this send: a non-blocking kernel send returns that too; for a
  // blocking one the caller sends the rest (ToeTransport::SendMsg).
  *n = static_cast<ssize_t>(of_this);
  return Outcome::kDone;
}

void SendCork::AfterDirectSend(ssize_t n, size_t total) {
  if (n >= 0 && static_cast<size_t>(n) == total) return;
  std::lock_guard<std::mutex> lock(mu_);
  last_was_send_ = false;
}

int SendCork::OtherCall() {
  std::lock_guard<std::mutex> lock(mu_);
  last_was_send_ = false;
  FlushOnceLocked();  // nothing when nothing is held or detached
  // EPIPE is a send's error only (the kernel gives no other call one):
  // it waits for the next send.
  if (error_ == 0 || error_ == EPIPE) return 0;
  int e = error_;
  error_ = 0;
  return -e;
}

void SendCork::FlushBeforeHandOver(int wait_ms, const char* why) {
  const int64_t deadline = MonotonicNs() + int64_t{wait_ms} * 1'000'000;
  for (;;) {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_was_send_ = false;
      if (len_ == 0 || detached_) return;
      if (ino_ != 0 && InodeOf(fd_) != ino_) {
        // The number no longer names our socket: nothing can be sent.
        VSOCKET_LOG(kWarn, "toe: %zu corked bytes lost at %s: the descriptor "
                    "was closed by a path vsocket does not see", len_, why);
        GetCorkCounters().bytes_abandoned.fetch_add(len_, std::memory_order_relaxed);
        DropHeld();
        return;
      }
      FlushOnceLocked();
      if (len_ == 0) return;
      fd = fd_;
    }
    const int64_t left = deadline - MonotonicNs();
    struct pollfd p = {fd, POLLOUT, 0};
    if (left <= 0 || sys::poll(&p, 1, static_cast<int>(left / 1'000'000) + 1) == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (len_ == 0) return;
      VSOCKET_LOG(kWarn, "toe: %zu corked bytes not sent at %s: the peer took "
                  "nothing for %d ms", len_, why, wait_ms);
      GetCorkCounters().bytes_abandoned.fetch_add(len_, std::memory_order_relaxed);
      DropHeld();
      return;
    }
  }
}

bool SendCork::PrepareFlush(struct iovec* iov, struct msghdr* msg) {
  if (len_ == 0 || detached_) return false;
  *iov = {buf_ + off_, len_};
  *msg = {};
  msg->msg_iov = iov;
  msg->msg_iovlen = 1;
  return true;
}

void SendCork::FlushOnceLocked() {
  struct iovec iov;
  struct msghdr m;
  if (!PrepareFlush(&iov, &m)) return;
  ssize_t r = sys::sendmsg(fd_, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  FinishFlush(r < 0 ? -errno : r);
}

void SendCork::FinishFlush(ssize_t result) {
  GetCorkCounters().flushes.fetch_add(1, std::memory_order_relaxed);
  if (result >= 0) {
    Consume(static_cast<size_t>(std::min<ssize_t>(result, static_cast<ssize_t>(len_))));
    return;
  }
  if (result == -EAGAIN || result == -EINTR) return;  // still held; a later flush
  DropHeld();
  error_ = static_cast<int>(-result);
}

void SendCork::MoveFd(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  fd_ = fd;
}

void SendCork::Detach() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (detached_ || len_ == 0 || HandOffLocked()) {
      detached_ = true;
      DropHeld();
      return;
    }
  }
  FlushBeforeHandOver(kHandOverWaitMs, "close");  // no duplicate to hand off
  std::lock_guard<std::mutex> lock(mu_);
  detached_ = true;
  DropHeld();
}

bool SendCork::HandOffLocked() {
  if (ino_ != 0 && InodeOf(fd_) != ino_) return false;  // the caller reports it
  FlushOnceLocked();
  if (len_ == 0) return true;
  int dup = sys::DupPrivate(fd_);
  if (dup < 0) return false;
  AdoptOrphan(dup, buf_ + off_, len_);
  DropHeld();
  return true;
}

bool SendCork::Append(const struct msghdr* msg, size_t total) {
  if (off_ > 0 && off_ + len_ + total > max_) {
    std::memmove(buf_, buf_ + off_, len_);
    off_ = 0;
  }
  char* const at = buf_ + off_ + len_;
  // The caller's bytes are read under the fault guard; held bytes are
  // counted only once all of them arrived.
  bool copied = GuardedUserCopy([&] {
    char* to = at;
    for (size_t i = 0; i < msg->msg_iovlen; ++i) {
      std::memcpy(to, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
      to += msg->msg_iov[i].iov_len;
    }
  });
  if (!copied) return false;
  len_ += total;
  return true;
}

void SendCork::Consume(size_t n) {
  off_ += n;
  len_ -= n;
  if (len_ == 0) off_ = 0;
}

void SendCork::DropHeld() {
  off_ = 0;
  len_ = 0;
}

ssize_t SendCork::ReportError(int flags) {
  int e = error_;
  error_ = 0;
  last_was_send_ = false;  // the next send asks the kernel
  // The kernel raises SIGPIPE on the send that fails with EPIPE.
  if (e == EPIPE && !(flags & MSG_NOSIGNAL)) pthread_kill(pthread_self(), SIGPIPE);
  errno = e;
  return -1;
}

}  // namespace vsocket::toe
