#include "toe_backend/toe_transport.h"

#include <errno.h>
#include <poll.h>

#include "base/real_libc.h"
#include "toe_backend/cork_list.h"
#include "toe_backend/toe_config.h"
#include "vsocket/iovec_util.h"
#include "vsocket/kernel_wait.h"
#include "vsocket/signal_restart.h"
#include "vsocket/stats.h"
#include "vsocket/tcp_transport.h"
#include "vsocket/wait.h"

namespace vsocket::toe {
namespace {

ssize_t Result(ssize_t r) {
  if (r >= 0) return r;
  errno = static_cast<int>(-r);
  return -1;
}

}  // namespace

ToeTransport::ToeTransport(UringEngine* engine, int fd, uint32_t cork_bytes)
    : engine_(engine), handle_(engine->Adopt(fd)), fd_(fd) {
  if (cork_bytes > 0) cork_ = std::make_shared<SendCork>(engine, handle_, fd, cork_bytes);
}

ToeTransport::~ToeTransport() { Release(); }

int ToeTransport::AfterOtherCall() {
  if (!cork_) return 0;
  int err = cork_->OtherCall();
  if (err == 0) return 0;
  errno = -err;
  return -1;
}

ssize_t ToeTransport::SendMsg(const struct msghdr* msg, int flags,
                              const IoOptions& io) {
  ssize_t n;
  if (cork_) {
    // The cork reads the array in user space: checked first as the
    // kernel's import_iovec would (a bad one is an errno, not a SIGSEGV).
    uint64_t checked_total = 0;
    if (int err = stream_io_internal::CheckIovArray(msg, /*sending=*/true, &checked_total)) {
      errno = err;
      return -1;
    }
    if (flags & MSG_FASTOPEN) {  // as StreamSendMsg: the kernel's answer
      errno = stream_io_internal::FastOpenError(msg);
      return -1;
    }
    const size_t total = static_cast<size_t>(checked_total);
    const bool nonblocking = io.nonblocking || (flags & MSG_DONTWAIT);
    const int64_t deadline = DeadlineAfter(io.timeout_ns);
    for (;;) {
      SendCork::Outcome o = cork_->Send(msg, total, flags, nonblocking, &n);
      if (o == SendCork::Outcome::kSendDirect) break;
      if (o == SendCork::Outcome::kDone) {
        if (n > 0 && static_cast<size_t>(n) < total && !nonblocking) {
          // A blocking send goes on, as the kernel's would: the rest of
          // this one went out after the held bytes only in part.
          std::vector<struct iovec> rest =
              IovSuffix(msg->msg_iov, msg->msg_iovlen, static_cast<size_t>(n));
          struct msghdr tail = *msg;
          tail.msg_iov = rest.data();
          tail.msg_iovlen = rest.size();
          ssize_t more = engine_->Send(handle_, &tail, flags | MSG_NOSIGNAL);
          if (more > 0) n += more;  // an error is the next call's, as the kernel's
        }
        if (n > 0) StatsBytesSent(kToeKind, static_cast<uint64_t>(n));
        return n;
      }
      // Held bytes wait for room in the kernel, as this send would.
      if (SleepUntil(POLLOUT, deadline) != 0) return -1;
    }
  }
  if (msg->msg_iovlen == 1 && !(flags & MSG_OOB) &&
      engine_->WantsZeroCopy(msg->msg_iov[0].iov_len)) {
    n = StreamSendMsg(*this, msg, flags, io);  // sets errno itself
  } else {
    n = Result(engine_->Send(handle_, msg, flags | (io.nonblocking ? MSG_DONTWAIT : 0)));
  }
  if (cork_) {
    int saved = errno;
    cork_->AfterDirectSend(n, IovTotal(msg->msg_iov, msg->msg_iovlen));
    errno = saved;
  }
  if (n > 0) StatsBytesSent(kToeKind, static_cast<uint64_t>(n));
  return n;
}

ssize_t ToeTransport::RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) {
  // The engine's read-ahead copies in user space: the array is checked
  // first, as the kernel's import_iovec would.
  uint64_t total = 0;
  if (int err = stream_io_internal::CheckIovArray(msg, /*sending=*/false, &total)) {
    errno = err;
    return -1;
  }
  if (AfterOtherCall() != 0) return -1;
  // A receive may sleep in the kernel: what other connections hold goes
  // out first (a proxy that writes one and reads another).
  if (!io.nonblocking && !(flags & MSG_DONTWAIT)) BeforeWait();
  ssize_t n = Result(engine_->Recv(handle_, msg, flags | (io.nonblocking ? MSG_DONTWAIT : 0)));
  if (n > 0 && !(flags & MSG_PEEK)) StatsBytesReceived(kToeKind, static_cast<uint64_t>(n));
  return n;
}

int ToeTransport::Shutdown(int how) {
  if (cork_ && how != SHUT_RD) cork_->FlushBeforeHandOver(kHandOverWaitMs, "shutdown");
  if (AfterOtherCall() != 0) return -1;
  return static_cast<int>(Result(engine_->Shutdown(handle_, how)));
}

int ToeTransport::ReadableBytes() {
  if (AfterOtherCall() != 0) return -1;
  return static_cast<int>(Result(engine_->ReadableBytes(handle_)));
}

int ToeTransport::TakeError() {
  if (cork_) {
    // A flush that failed took the socket's error: it is reported here.
    if (int err = cork_->OtherCall()) return -err;
  }
  return engine_->TakeError(handle_);
}

void ToeTransport::MoveUserFd(int fd) {
  engine_->MoveKernelFd(handle_, fd);
  if (cork_) cork_->MoveFd(fd);
  fd_ = fd;
}

void ToeTransport::RecvLowatChanged(uint32_t lowat) {
  if (lowat > 1 && !successor()) engine_->Quiesce(handle_);
}

void ToeTransport::BeforeFork() {
  if (cork_) cork_->FlushBeforeHandOver(kHandOverWaitMs, "fork");
  engine_->Quiesce(handle_);
}

void ToeTransport::AfterForkInChild() {
  if (!cork_) return;
  // Another thread may have held the parent's cork lock at the fork: the
  // old cork is kept aside, never used, and the child starts empty.
  cork_before_fork_ = std::move(cork_);
  cork_ = std::make_shared<SendCork>(engine_, handle_, fd_, GetToeConfig().cork_bytes);
}

bool ToeTransport::MoveToKernelTcp(FallbackReason reason) {
  if (successor()) return true;
  if (cork_) cork_->FlushBeforeHandOver(kHandOverWaitMs, "the move to kernel TCP");
  engine_->Quiesce(handle_);
  Retire(std::make_unique<TcpTransport>(fd_, reason));
  return true;
}

void ToeTransport::Release() {
  if (released_) return;
  released_ = true;
  if (cork_) cork_->Detach();
  engine_->Close(handle_);
}

ssize_t ToeTransport::TrySend(StreamCall&, const struct iovec* iov, int iovcnt,
                              size_t skip) {
  if (iovcnt == 0) {
    // A zero-length send reports what a send would report now.
    struct msghdr empty = {};
    return engine_->Send(handle_, &empty, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  const char* data = static_cast<const char*>(iov[0].iov_base) + skip;
  size_t len = iov[0].iov_len - skip;
  ssize_t r = engine_->SendZeroCopy(handle_, data, len, 0, 0);
  uint64_t done[8];
  while (engine_->TakeSendDone(done, 8) == 8) {
  }
  if (r == -EOPNOTSUPP) {
    struct iovec rest = {const_cast<char*>(data), len};
    struct msghdr m = {};
    m.msg_iov = &rest;
    m.msg_iovlen = 1;
    r = engine_->Send(handle_, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  return r;
}

ssize_t ToeTransport::TryRecv(StreamCall&, const struct iovec* iov, int iovcnt,
                              size_t skip, bool peek) {
  std::vector<struct iovec> rest = IovSuffix(iov, static_cast<size_t>(iovcnt), skip);
  struct msghdr m = {};
  m.msg_iov = rest.data();
  m.msg_iovlen = rest.size();
  return engine_->Recv(handle_, &m, MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
}

int ToeTransport::WaitWritable(StreamCall& call) {
  return SleepUntil(POLLOUT, call.deadline_ns()) == 0 ? 0 : -errno;
}

int ToeTransport::WaitReadable(StreamCall& call) {
  return SleepUntil(POLLIN, call.deadline_ns()) == 0 ? 0 : -errno;
}

int ToeTransport::SleepUntil(short events, int64_t deadline_ns) {
  struct pollfd p = {fd_, events, 0};
  // After an SA_RESTART handler the wait resumes (vsocket/signal_restart.h).
  SignalRestartWindow signals;
  int rc;
  do {
    rc = PollUntil(&p, 1, deadline_ns);
  } while (rc < 0 && errno == EINTR && signals.ShouldRestart(deadline_ns >= 0));
  if (rc < 0) return -1;
  if (rc == 0) {
    errno = EAGAIN;
    return -1;
  }
  return 0;
}

}  // namespace vsocket::toe
