#include "toe_backend/toe_transport.h"

#include <errno.h>
#include <poll.h>

#include "base/real_libc.h"
#include "vsocket/iovec_util.h"
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

ToeTransport::ToeTransport(UringEngine* engine, int fd)
    : engine_(engine), handle_(engine->Adopt(fd)), fd_(fd) {}

ToeTransport::~ToeTransport() { Release(); }

ssize_t ToeTransport::SendMsg(const struct msghdr* msg, int flags,
                              const IoOptions& io) {
  ssize_t n;
  if (msg->msg_iovlen == 1 && !(flags & MSG_OOB) &&
      engine_->WantsZeroCopy(msg->msg_iov[0].iov_len)) {
    n = StreamSendMsg(*this, msg, flags, io);  // sets errno itself
  } else {
    n = Result(engine_->Send(handle_, msg, flags | (io.nonblocking ? MSG_DONTWAIT : 0)));
  }
  if (n > 0) StatsBytesSent(kToeKind, static_cast<uint64_t>(n));
  return n;
}

ssize_t ToeTransport::RecvMsg(struct msghdr* msg, int flags, const IoOptions& io) {
  ssize_t n = Result(engine_->Recv(handle_, msg, flags | (io.nonblocking ? MSG_DONTWAIT : 0)));
  if (n > 0 && !(flags & MSG_PEEK)) StatsBytesReceived(kToeKind, static_cast<uint64_t>(n));
  return n;
}

int ToeTransport::Shutdown(int how) {
  return static_cast<int>(Result(engine_->Shutdown(handle_, how)));
}

int ToeTransport::ReadableBytes() {
  return static_cast<int>(Result(engine_->ReadableBytes(handle_)));
}

int ToeTransport::TakeError() { return engine_->TakeError(handle_); }

void ToeTransport::MoveUserFd(int fd) {
  engine_->MoveKernelFd(handle_, fd);
  fd_ = fd;
}

void ToeTransport::BeforeFork() { engine_->Quiesce(handle_); }

bool ToeTransport::MoveToKernelTcp(FallbackReason reason) {
  if (successor()) return true;
  engine_->Quiesce(handle_);
  Retire(std::make_unique<TcpTransport>(fd_, reason));
  return true;
}

void ToeTransport::Release() {
  if (released_) return;
  released_ = true;
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
