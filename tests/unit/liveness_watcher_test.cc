// The liveness watcher's wake socket: one per process, bound to
// "vsk1/P/<pid>"; a datagram naming a watched target calls its OnPeerWake,
// doorbells send their wake-ups from it, and a forked child binds its own.
#include "fifo_bridge/liveness_watcher.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "base/after_fork.h"
#include "fifo_bridge/doorbell.h"
#include "fifo_bridge/rendezvous.h"

namespace vsocket::fifo {
namespace {

class CountingTarget : public LivenessTarget {
 public:
  bool OnLivenessEvent() override { return true; }
  void OnPeerWake() override { wakes.fetch_add(1); }
  std::atomic<int> wakes{0};
};

// Waits up to 2 s for `done`.
template <typename Done>
bool Eventually(Done done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

int SendTo(const std::string& name, const std::string& payload) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr;
  socklen_t len = AbstractAddress(name, &addr);
  ssize_t n = ::sendto(fd, payload.data(), payload.size(), 0,
                       reinterpret_cast<struct sockaddr*>(&addr), len);
  int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

// True when every thread of this process but the caller sleeps in the
// kernel.  A test forks only then: the sanitizers of gcc 12 do not hold
// their allocator's locks across fork(), so a fork while another thread
// allocates (the watcher thread starting) leaves the child's copy of a lock
// held for good, and the child's first thread hangs on it.
bool OtherThreadsSleep() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return true;
  const std::string self = std::to_string(::gettid());
  bool asleep = true;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.' || self == e->d_name) continue;
    std::ifstream stat(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'S')
      asleep = false;
  }
  ::closedir(dir);
  return asleep;
}

// The abstract name `fd` is bound to ("" if none).
std::string BoundName(int fd) {
  struct sockaddr_un addr = {};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0 ||
      len <= offsetof(struct sockaddr_un, sun_path) + 1)
    return "";
  return std::string(addr.sun_path + 1, len - offsetof(struct sockaddr_un, sun_path) - 1);
}

TEST(LivenessWatcherTest, ADatagramNamingATargetWakesItAndNoOther) {
  CountingTarget named, other;
  WatchWakes("sone-key", &named);
  WatchWakes("ctwo-key", &other);
  ASSERT_GE(ProcessWakeSocket(), 0);
  EXPECT_EQ(BoundName(ProcessWakeSocket()), WakeSocketName(::getpid()));
  EXPECT_EQ(SendTo(WakeSocketName(::getpid()), "sone-key"), 0);
  EXPECT_TRUE(Eventually([&] { return named.wakes.load() == 1; }));
  // A name nobody watches, and one that is a prefix of a watched one.
  EXPECT_EQ(SendTo(WakeSocketName(::getpid()), "sone"), 0);
  EXPECT_EQ(SendTo(WakeSocketName(::getpid()), "ctwo-key"), 0);
  EXPECT_TRUE(Eventually([&] { return other.wakes.load() == 1; }));
  EXPECT_EQ(named.wakes.load(), 1);
  // Another target's unwatch of the name leaves it watched.
  UnwatchWakes("ctwo-key", &named);
  EXPECT_EQ(SendTo(WakeSocketName(::getpid()), "ctwo-key"), 0);
  EXPECT_TRUE(Eventually([&] { return other.wakes.load() == 2; }));
  UnwatchWakes("sone-key", &named);
  UnwatchWakes("ctwo-key", &other);
  EXPECT_EQ(SendTo(WakeSocketName(::getpid()), "sone-key"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(named.wakes.load(), 1);
}

TEST(LivenessWatcherTest, WakeUpsLeaveFromTheWakeSocketNotTheWaitSocket) {
  CountingTarget target;
  WatchWakes("sstarted", &target);  // starts the watcher: a wake socket
  ASSERT_GE(ProcessWakeSocket(), 0);
  std::string key = "wake-source-" + std::to_string(::getpid());
  Doorbell client, server;
  ASSERT_EQ(client.Open(key, 'c', 's'), 0);
  ASSERT_EQ(server.Open(key, 's', 'c'), 0);
  ASSERT_EQ(client.RingPeer(), 0);
  char byte;
  struct sockaddr_un from = {};
  socklen_t from_len = sizeof(from);
  ASSERT_EQ(::recvfrom(server.wait_fd(), &byte, 1, MSG_DONTWAIT,
                       reinterpret_cast<struct sockaddr*>(&from), &from_len),
            1);
  EXPECT_EQ(std::string(from.sun_path + 1,
                        from_len - offsetof(struct sockaddr_un, sun_path) - 1),
            WakeSocketName(::getpid()));
  // The peer's watcher is asked through its process's wake socket with the
  // peer side's name: here, this process's.
  CountingTarget server_side;
  WatchWakes(server.my_wake_name(), &server_side);
  EXPECT_EQ(client.WakePeerWatcher(::getpid()), 0);
  EXPECT_TRUE(Eventually([&] { return server_side.wakes.load() == 1; }));
  UnwatchWakes(server.my_wake_name(), &server_side);
  UnwatchWakes("sstarted", &target);
}

TEST(LivenessWatcherTest, AForkedChildBindsAWakeSocketOfItsOwn) {
  CountingTarget target;
  WatchWakes("sforked", &target);
  int parents = ProcessWakeSocket();
  ASSERT_GE(parents, 0);
  ASSERT_TRUE(Eventually(OtherThreadsSleep));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's descriptor is closed inside fork(), and nothing starts
    // there (base/after_fork.h); the child's own is bound to its pid once
    // the child's work after fork() runs -- as the interposer's fork() and
    // the explicit API run it -- and the inherited name keeps working.
    // The exit code says which step failed.
    if (ProcessWakeSocket() != -1) _exit(1);
    sys::RunForkedChildWork();
    int mine = ProcessWakeSocket();
    if (mine < 0) _exit(2);
    if (BoundName(mine) != WakeSocketName(::getpid())) _exit(3);
    if (SendTo(WakeSocketName(::getpid()), "sforked") != 0) _exit(4);
    if (!Eventually([&] { return target.wakes.load() == 1; })) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the step of the child that failed";
  EXPECT_EQ(BoundName(parents), WakeSocketName(::getpid()));
  EXPECT_EQ(target.wakes.load(), 0);  // the child's datagram was the child's
  UnwatchWakes("sforked", &target);
}

// Containers on the host network, or a root made with unshare --pid, number
// their processes apart but share the abstract names: a process of ours
// whose pid is the other's number must not take (or be sent) its wake-ups.
TEST(LivenessWatcherTest, AProcessOfAnotherPidNamespaceWithOurNumberBindsItsOwnName) {
  if (::geteuid() != 0) GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  // The name of pid 1 of our namespace: the number the process below has in
  // its own.
  const std::string ours = WakeSocketName(1);
  int squatter = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un addr;
  socklen_t len = AbstractAddress(ours, &addr);
  ASSERT_EQ(::bind(squatter, reinterpret_cast<struct sockaddr*>(&addr), len), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWPID) != 0) _exit(2);
    pid_t inner = ::fork();
    if (inner == 0) {
      int ok = ::getpid() == 1;
      CountingTarget target;
      WatchWakes("sinner", &target);
      int mine = ProcessWakeSocket();
      if (WakeSocketName(1) == ours) ok = 0;
      if (mine < 0 || BoundName(mine) != WakeSocketName(1)) ok = 0;
      if (SendTo(WakeSocketName(1), "sinner") != 0) ok = 0;
      if (!Eventually([&] { return target.wakes.load() == 1; })) ok = 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (inner < 0 || ::waitpid(inner, &status, 0) != inner) _exit(3);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  char byte;
  EXPECT_LT(::recv(squatter, &byte, 1, 0), 0);  // nothing came to our name
  EXPECT_EQ(errno, EAGAIN);
  ::close(squatter);
}

}  // namespace
}  // namespace vsocket::fifo
