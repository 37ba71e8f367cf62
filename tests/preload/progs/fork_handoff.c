/* Fork-per-connection: the parent accepts, forks, and closes its copy at
 * once; the child serves the connection.  The peer must see the child's
 * data and then end of stream, never an early EOF or reset.  Also a child
 * that forks a grandchild which execs a program (socat's EXEC:). */
#include "ptest.h"

#include <sys/wait.h>

int main(void) {
  ptest_start(30);
  char buf[64];
  for (int round = 0; round < 20; ++round) {
    int c, s;
    make_pair(&c, &s);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      close(c);
      sleep_ms(round % 4 == 0 ? 50 : 0);
      if (round % 2) {
        /* A grandchild that execs, holding the connection too. */
        pid_t g = fork();
        if (g == 0) {
          execlp("true", "true", (char*)NULL);
          _exit(127);
        }
        waitpid(g, NULL, 0);
      }
      CHECK_EQ(write(s, "served", 6), 6);
      CHECK_EQ(read(s, buf, sizeof(buf)), 3);
      CHECK(close(s) == 0);
      _exit(0);
    }
    CHECK(close(s) == 0);  /* the parent lets go at once */
    CHECK_EQ(read(c, buf, sizeof(buf)), 6);
    CHECK(memcmp(buf, "served", 6) == 0);
    CHECK_EQ(write(c, "ack", 3), 3);
    CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
    CHECK_EQ(read(c, buf, sizeof(buf)), 0);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(c);
  }
  printf("PASS\n");
  return 0;
}
