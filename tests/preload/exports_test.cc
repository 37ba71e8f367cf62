// libvsocket_preload.so exports exactly the interposed functions, and links
// no C++ runtime dynamically (it carries its own, hidden).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "preload_harness.h"

namespace vsocket_preload_test {
namespace {

std::string Library() {
  return std::filesystem::path(RunnerPath()).parent_path() / "libvsocket_preload.so";
}

std::string Tool(const std::vector<std::string>& argv) {
  Options o;
  o.preload = false;
  Result r = Run(argv, o, Ms(20000));
  EXPECT_TRUE(r.exit.Ok()) << argv[0] << ": " << r.err;
  return r.out;
}

TEST(Exports, OnlyTheInterposedSymbols) {
  std::istringstream nm(Tool({"nm", "-D", "--defined-only", Library()}));
  std::set<std::string> defined;
  std::string addr, type, name;
  while (nm >> addr >> type >> name) defined.insert(name);
  const std::set<std::string> expected = {
      "socket", "bind", "listen", "accept", "accept4", "connect", "shutdown",
      "close", "close_range", "closefrom", "fclose", "fdopen", "dup", "dup2", "dup3",
      "read", "readv", "write", "writev", "preadv2", "preadv64v2", "pwritev2",
      "pwritev64v2", "recv", "recvfrom", "recvmsg",
      "recvmmsg", "send", "sendto", "sendmsg", "sendmmsg",
      "sendfile", "sendfile64", "splice",
      "fcntl", "fcntl64", "ioctl", "getsockopt", "setsockopt", "getsockname",
      "getpeername", "poll", "__poll_chk", "ppoll", "__ppoll_chk", "select",
      "pselect", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "__read_chk", "__recv_chk", "__recvfrom_chk",
      "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle",
      "fexecve", "execveat", "sigaction", "signal", "bsd_signal",
      "siginterrupt", "_exit", "_Exit", "fork", "syscall", "clone",
      "posix_spawn", "posix_spawnp", "system", "popen", "vfork",
      "io_uring_setup", "io_uring_queue_init", "io_uring_queue_init_params"};
  EXPECT_EQ(defined, expected);
}

TEST(Exports, NoDynamicCxxRuntime) {
  std::string dyn = Tool({"readelf", "-d", Library()});
  EXPECT_EQ(dyn.find("libstdc++"), std::string::npos) << dyn;
  EXPECT_EQ(dyn.find("libgcc_s"), std::string::npos) << dyn;
  // Strong references to C++ symbols would bind to the application's
  // runtime; weak ones (transactional-memory clones) stay unresolved.
  std::istringstream nm(Tool({"nm", "-D", "--undefined-only", Library()}));
  std::string type, name;
  while (nm >> type >> name) {
    if (type == "U") {
      EXPECT_NE(name.rfind("_Z", 0), 0u) << name;
    }
  }
}

}  // namespace
}  // namespace vsocket_preload_test
