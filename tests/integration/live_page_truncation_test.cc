// live_page_truncation: another process of the user truncates this
// process's live statistics page (/dev/shm/vsocket-<uid>/live-<pidns>/stat-<pid>, which
// vsocket-stat reads).  Before: the process died of SIGBUS at its next
// count into the page.  Now the page's mapping gets private zero pages
// (base/shared_file_fault_guard.h, vsocket/live_stats.cc), the process
// keeps working and says so once on stderr.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "loopback.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_test_support::Loopback;

// One loopback connection through vsocket (a plain kernel listener on the
// other end: TCP, with a live slot), a byte each way, closed.
bool OneConnection(int lfd, int port) {
  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(port);
  if (vsocket_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
  int s = accept(lfd, nullptr, nullptr);
  char c = 'x';
  bool ok = s >= 0 && vsocket_send(fd, &c, 1, MSG_NOSIGNAL) == 1 && recv(s, &c, 1, 0) == 1 &&
            send(s, &c, 1, MSG_NOSIGNAL) == 1 && vsocket_recv(fd, &c, 1, 0) == 1;
  if (s >= 0) close(s);
  vsocket_close(fd);
  return ok;
}

TEST(LivePageTruncation, TheProcessSurvivesAndSaysSoOnce) {
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    setenv("VSOCKET_TRANSPORT", "auto", 1);
    setenv("VSOCKET_LIVE_STATS", "1", 1);
    alarm(30);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof(a);
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(lfd, 16) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      _exit(10);
    int port = ntohs(a.sin_port);
    if (!OneConnection(lfd, port)) _exit(11);  // the page exists now
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) != 0) _exit(15);
    char dir[64];
    snprintf(dir, sizeof(dir), "/dev/shm/vsocket-%u/live-%llx", getuid(),
             static_cast<unsigned long long>(ns.st_ino));
    std::string page = std::string(dir) + "/stat-" + std::to_string(getpid());
    int fd = open(page.c_str(), O_RDWR);
    if (fd < 0) _exit(12);
    if (ftruncate(fd, 0) != 0) _exit(13);  // what another process could do
    close(fd);
    for (int i = 0; i < 20; ++i) {
      if (!OneConnection(lfd, port)) _exit(14);
    }
    _exit(0);
  }
  close(err_pipe[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof(buf))) > 0;) err.append(buf, n);
  close(err_pipe[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                              : "exit " + std::to_string(WEXITSTATUS(status)))
      << "\n" << err;
  const std::string kSaid = "the live statistics page lost its pages";
  size_t at = err.find(kSaid);
  EXPECT_NE(at, std::string::npos) << err;
  if (at != std::string::npos) {
    EXPECT_EQ(err.find(kSaid, at + 1), std::string::npos) << err;
  }
}

}  // namespace
