/* Writing to a peer whose process was killed (SIGKILL: no close of its
 * own), as kernel TCP behaves: the kernel closes the dead process's socket
 * (FIN), so ONE send still succeeds and draws the peer's RST, then sends
 * fail with EPIPE, and receives read what the peer wrote, then end of
 * stream.  If the dead peer left bytes unread, its kernel resets at once:
 * the first send fails with ECONNRESET, then EPIPE.
 * usage: killed_peer */
#include <sys/wait.h>

#include "ptest.h"

/* A connection whose server end lives in a child that writes `greeting`,
 * reads `unread_by_peer` bytes less than we send it (0: all), then is
 * killed. */
static int pair_with_killed_peer(int leave_unread) {
  int c, s;
  make_pair(&c, &s);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    CHECK(close(c) == 0);
    write_all(s, "hello\n", 6);
    char b[8];
    read_exact(s, b, 4); /* "ping" */
    CHECK(write(s, "r", 1) == 1); /* the ping was read */
    pause();
    _exit(0);
  }
  CHECK(close(s) == 0);
  write_all(c, "ping", 4);
  char b[8];
  read_exact(c, b, 7);
  CHECK(memcmp(b, "hello\nr", 7) == 0);
  if (leave_unread) write_all(c, "unread", 6);
  sleep_ms(50);
  CHECK(kill(pid, SIGKILL) == 0);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN); /* the FIN or RST */
  sleep_ms(50);
  return c;
}

int main(void) {
  ptest_start(30);
  char b[8];

  int c = pair_with_killed_peer(0);
  CHECK_EQ(send(c, "after", 5, MSG_NOSIGNAL), 5);
  sleep_ms(50); /* kernel TCP: the RST comes back */
  CHECK_ERR(send(c, "after", 5, MSG_NOSIGNAL), EPIPE);
  CHECK_EQ(recv(c, b, sizeof(b), 0), 0);
  CHECK(close(c) == 0);

  c = pair_with_killed_peer(1);
  CHECK_ERR(send(c, "after", 5, MSG_NOSIGNAL), ECONNRESET);
  CHECK_ERR(send(c, "after", 5, MSG_NOSIGNAL), EPIPE);
  CHECK_EQ(recv(c, b, sizeof(b), 0), 0);
  CHECK(close(c) == 0);

  printf("PASS\n");
  return 0;
}
