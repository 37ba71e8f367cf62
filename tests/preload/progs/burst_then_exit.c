/* A forked child writes a reply as a burst of small send() calls and
 * leaves -- with _exit(), exit() or _Exit() -- without closing: the peer
 * must read every byte, in order, then end of stream, as on kernel TCP.
 * (On toe a burst's tail is held in user memory: the interposed _exit and
 * exit's handler must send it.) */
#include "ptest.h"

#include <sys/wait.h>

enum { kMessages = 2000, kSize = 64 };

static void serve_burst(int s) {
  unsigned char msg[kSize];
  for (int i = 0; i < kMessages; ++i) {
    fill_pattern(msg, kSize, (uint64_t)i * kSize);
    CHECK_EQ(send(s, msg, kSize, MSG_NOSIGNAL), kSize);
  }
}

int main(void) {
  ptest_start(30);
  static unsigned char got[kMessages * kSize];
  for (int how = 0; how < 3; ++how) {
    int c, s;
    pid_t pid = fork_with_pair(&c, &s);
    if (pid == 0) {
      serve_burst(s);
      if (how == 0) _exit(0);
      if (how == 1) exit(0);
      _Exit(0);
    }
    CHECK(close(s) == 0);
    read_exact(c, got, sizeof(got));
    CHECK(check_pattern(got, sizeof(got), 0));
    CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
    CHECK_EQ(read(c, got, 1), 0);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(close(c) == 0);
  }
  printf("PASS\n");
  return 0;
}
