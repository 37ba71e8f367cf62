// stream_io: the send/recv rules over scripted StreamSteps (no transport).
#include "vsocket/stream_io.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace vsocket {
namespace {

// Records what the core asked for; answers from scripts.
class ScriptedSteps final : public StreamSteps {
 public:
  std::deque<ssize_t> attempts;  // results of TrySend/TryRecv, in order
  std::deque<int> waits;         // results of the waits (default 0)
  std::vector<size_t> skips;     // `skip` of each attempt
  std::vector<int> iovcnts;      // `iovcnt` of each attempt
  std::string log;               // B(egin) S(end) R(ecv) W(ait) E(nd)
  Transport* moved_to = nullptr;

  void BeginCall(StreamCall&) override { log += 'B'; }
  void EndCall(StreamCall&) override { log += 'E'; }
  // log grows by one letter per step: bounded by Next's limit.
  ssize_t TrySend(StreamCall&, const struct iovec*, int iovcnt,
                  size_t skip) override {
    log += 'S';
    return Next(iovcnt, skip);
  }
  ssize_t TryRecv(StreamCall&, const struct iovec*, int iovcnt, size_t skip,
                  bool) override {
    log += 'R';
    return Next(iovcnt, skip);
  }
  std::vector<uint64_t> wait_bytes;  // StreamCall::wait_bytes of each WaitReadable
  int WaitWritable(StreamCall&) override { return Wait(); }
  int WaitReadable(StreamCall& call) override {
    wait_bytes.push_back(call.wait_bytes);
    return Wait();
  }
  Transport* MovedTo() override { return moved_to; }

 private:
  ssize_t Next(int iovcnt, size_t skip) {
    // A core that keeps retrying fails the test instead of eating memory.
    if (iovcnts.size() >= 1000) {
      ADD_FAILURE() << "the core loops: " << log.substr(0, 40) << "...";
      return -EIO;
    }
    iovcnts.push_back(iovcnt);
    skips.push_back(skip);
    if (attempts.empty()) return -EAGAIN;
    ssize_t r = attempts.front();
    attempts.pop_front();
    return r;
  }
  int Wait() {
    if (log.size() < 4000) log += 'W';
    if (waits.empty()) return 0;
    int r = waits.front();
    waits.pop_front();
    return r;
  }
};

// A successor that takes everything it is given.
class SinkTransport final : public Transport {
 public:
  uint64_t sent = 0;
  int recv_calls = 0;
  TransportKind kind() const override { return TransportKind::kTcp; }
  uint32_t capabilities() const override { return kCapKernelStream; }
  FallbackReason fallback_reason() const override { return FallbackReason::kPeerNotVsocket; }
  ssize_t SendMsg(const struct msghdr* msg, int, const IoOptions&) override {
    uint64_t n = 0;
    for (size_t i = 0; i < msg->msg_iovlen; ++i) n += msg->msg_iov[i].iov_len;
    sent += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t RecvMsg(struct msghdr*, int, const IoOptions&) override {
    ++recv_calls;
    return 7;
  }
  int Shutdown(int) override { return 0; }
  int ReadableBytes() override { return 0; }
  int TakeError() override { return 0; }
  int user_fd() const override { return -1; }
  void MoveUserFd(int) override {}
  int tcp_fd() const override { return -1; }
  void Release() override {}
};

struct Buffer {
  char bytes[100] = {};
  struct iovec iov[2] = {{bytes, 60}, {bytes + 60, 40}};
  struct msghdr msg = {};
  Buffer() {
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
  }
};

IoOptions Blocking() { return IoOptions{}; }
IoOptions Nonblocking() {
  IoOptions io;
  io.nonblocking = true;
  return io;
}

TEST(StreamIo, MsgOobIsRefusedBeforeAnyStep) {
  ScriptedSteps steps;
  Buffer b;
  errno = 0;
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, MSG_OOB, Blocking()), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_OOB, Blocking()), -1);
  EXPECT_EQ(errno, EINVAL);
  b.iov[0].iov_len = b.iov[1].iov_len = 0;  // even for zero length
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_OOB, Blocking()), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(steps.log, "");
}

TEST(StreamIo, ZeroLengthSendAsksTheTransportForErrors) {
  ScriptedSteps steps;
  Buffer b;
  b.iov[0].iov_len = b.iov[1].iov_len = 0;
  steps.attempts = {0, -EPIPE};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Blocking()), 0);
  errno = 0;
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, MSG_NOSIGNAL, Blocking()), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(steps.iovcnts, (std::vector<int>{0, 0}));
  EXPECT_EQ(steps.log, "BSEBSE");
}

// As kernel TCP: a zero-length receive waits like a receive (a one-byte
// peek) and returns 0 once something is readable, consuming nothing.
TEST(StreamIo, ZeroLengthRecvWaitsUntilReadableThenReturnsZero) {
  ScriptedSteps steps;
  Buffer b;
  b.iov[0].iov_len = b.iov[1].iov_len = 0;
  steps.attempts = {-EAGAIN, 1};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 0);
  EXPECT_EQ(steps.log, "BRWRE");
}

TEST(StreamIo, ZeroLengthRecvNonblockingOnEmptyIsEagain) {
  ScriptedSteps steps;
  Buffer b;
  b.iov[0].iov_len = b.iov[1].iov_len = 0;
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_DONTWAIT, Blocking()), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(StreamIo, ZeroLengthRecvAtTimeoutReturnsZero) {
  ScriptedSteps steps;
  Buffer b;
  b.iov[0].iov_len = b.iov[1].iov_len = 0;
  steps.waits = {-EAGAIN};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 0);
}

TEST(StreamIo, EpipeRaisesSigpipeUnlessNosignal) {
  static int sigpipes;
  sigpipes = 0;
  struct sigaction sa = {}, old = {};
  sa.sa_handler = [](int) { ++sigpipes; };
  sigaction(SIGPIPE, &sa, &old);
  ScriptedSteps steps;
  Buffer b;
  steps.attempts = {-EPIPE, -EPIPE};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, MSG_NOSIGNAL, Blocking()), -1);
  EXPECT_EQ(sigpipes, 0);
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Blocking()), -1);
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(sigpipes, 1);
  sigaction(SIGPIPE, &old, nullptr);
}

TEST(StreamIo, BlockingSendWaitsUntilEverythingIsTaken) {
  ScriptedSteps steps;
  Buffer b;
  steps.attempts = {30, -EAGAIN, 50, 20};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Blocking()), 100);
  EXPECT_EQ(steps.skips, (std::vector<size_t>{0, 30, 30, 80}));
  EXPECT_EQ(steps.log, "BSSWSSE");
}

TEST(StreamIo, NonblockingSendReturnsPartialOrEagain) {
  ScriptedSteps steps;
  Buffer b;
  steps.attempts = {30, -EAGAIN, -EAGAIN};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Nonblocking()), 30);
  errno = 0;
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, MSG_DONTWAIT, Blocking()), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(steps.log.find('W'), std::string::npos);
}

TEST(StreamIo, TimeoutOrSignalAfterSomeBytesReturnsTheCount) {
  ScriptedSteps steps;
  Buffer b;
  steps.attempts = {10, -EAGAIN};
  steps.waits = {-EAGAIN};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Blocking()), 10);
  steps.attempts = {-EAGAIN};
  steps.waits = {-EINTR};
  errno = 0;
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), -1);
  EXPECT_EQ(errno, EINTR);
}

TEST(StreamIo, RecvReturnsWhatArrivedUnlessWaitall) {
  ScriptedSteps steps;
  Buffer b;
  steps.attempts = {10};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 10);
  steps.attempts = {10, -EAGAIN, 85, 5};
  steps.skips.clear();
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_WAITALL, Blocking()), 100);
  EXPECT_EQ(steps.skips, (std::vector<size_t>{0, 10, 10, 95}));
  steps.attempts = {10, 0};  // end of stream cuts MSG_WAITALL short
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_WAITALL, Blocking()), 10);
  steps.attempts = {10};  // MSG_PEEK disables MSG_WAITALL
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_WAITALL | MSG_PEEK, Blocking()), 10);
}

IoOptions WithLowat(uint32_t mark, bool nonblocking = false) {
  IoOptions io;
  io.recv_lowat = mark;
  io.nonblocking = nonblocking;
  return io;
}

TEST(StreamIo, RcvLowatTakesBytesUntilMinOfMarkAndLength) {
  ScriptedSteps steps;
  Buffer b;
  // 3 queued, then the wait for the mark's 10, then 7: 10 >= min(10, 100).
  steps.attempts = {3, -EAGAIN, 7};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, WithLowat(10)), 10);
  EXPECT_EQ(steps.skips, (std::vector<size_t>{0, 3, 3}));
  EXPECT_EQ(steps.wait_bytes, (std::vector<uint64_t>{10}));
  // A length below the mark: min(mark, length).
  struct iovec two = {b.bytes, 2};
  struct msghdr small = {};
  small.msg_iov = &two;
  small.msg_iovlen = 1;
  steps.attempts = {2};
  EXPECT_EQ(StreamRecvMsg(steps, &small, 0, WithLowat(10)), 2);
  // Non-blocking: what is there.
  steps.attempts = {3, -EAGAIN};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, WithLowat(10, true)), 3);
  // No mark: the first bytes, no further attempt (the loop as before).
  steps.attempts = {3};
  steps.skips.clear();
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 3);
  EXPECT_EQ(steps.skips, (std::vector<size_t>{0}));
}

TEST(StreamIo, RcvLowatTimeoutOrSignalTakesWhatIsQueued) {
  ScriptedSteps steps;
  Buffer b;
  // 3 taken, the wait times out, 4 more are queued by then: 7.
  steps.attempts = {3, -EAGAIN, 4};
  steps.waits = {-EAGAIN};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, WithLowat(10)), 7);
  EXPECT_EQ(steps.log.substr(steps.log.size() - 5), "RRWRE");
  // Nothing at all: EAGAIN (the timeout) or EINTR (a signal).
  steps.attempts = {-EAGAIN, -EAGAIN};
  steps.waits = {-EINTR};
  errno = 0;
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, WithLowat(10)), -1);
  EXPECT_EQ(errno, EINTR);
}

TEST(StreamIo, RcvLowatPeekWaitsForTheMarkThenLooksAgain) {
  ScriptedSteps steps;
  Buffer b;
  // 4 queued: wait for the mark, then peek from the start again.
  steps.attempts = {4, 10};
  steps.skips.clear();
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_PEEK, WithLowat(10)), 10);
  EXPECT_EQ(steps.skips, (std::vector<size_t>{0, 0}));
  EXPECT_EQ(steps.wait_bytes, (std::vector<uint64_t>{10}));
  // At the timeout: what is queued then.
  steps.attempts = {4, 6};
  steps.waits = {-EAGAIN};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_PEEK, WithLowat(10)), 6);
}

TEST(StreamIo, RecvSetsMsghdrFieldsOnSuccessOnlyAsKernelTcp) {
  ScriptedSteps steps;
  Buffer b;
  struct sockaddr_storage name;
  char control[32];
  b.msg.msg_name = &name;
  b.msg.msg_namelen = sizeof(name);
  b.msg.msg_control = control;
  b.msg.msg_controllen = sizeof(control);
  b.msg.msg_flags = 0x55;
  steps.attempts = {-ECONNRESET};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_EQ(b.msg.msg_namelen, sizeof(name));
  EXPECT_EQ(b.msg.msg_controllen, sizeof(control));
  EXPECT_EQ(b.msg.msg_flags, 0x55);
  steps.attempts = {4};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 4);
  EXPECT_EQ(b.msg.msg_namelen, 0u);
  EXPECT_EQ(b.msg.msg_controllen, 0u);
  EXPECT_EQ(b.msg.msg_flags, 0);
  b.msg.msg_name = nullptr;
  b.msg.msg_namelen = 77;
  steps.attempts = {4};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 4);
  EXPECT_EQ(b.msg.msg_namelen, 77u);
}

TEST(StreamIo, SendMovedMidCallContinuesOnTheSuccessor) {
  ScriptedSteps steps;
  SinkTransport next;
  steps.moved_to = &next;
  Buffer b;
  steps.attempts = {25, -EAGAIN, kStreamMoved};
  EXPECT_EQ(StreamSendMsg(steps, &b.msg, 0, Blocking()), 100);
  EXPECT_EQ(next.sent, 75u);
  EXPECT_EQ(steps.log, "BSSWSE");  // the call ended here before moving on
}

TEST(StreamIo, RecvMovedReturnsWhatArrivedOrAsksTheSuccessor) {
  ScriptedSteps steps;
  SinkTransport next;
  steps.moved_to = &next;
  Buffer b;
  steps.attempts = {kStreamMoved};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, 0, Blocking()), 7);
  EXPECT_EQ(next.recv_calls, 1);
  steps.attempts = {10, kStreamMoved};
  EXPECT_EQ(StreamRecvMsg(steps, &b.msg, MSG_WAITALL, Blocking()), 10);
  EXPECT_EQ(next.recv_calls, 1);
}

}  // namespace
}  // namespace vsocket
