/* A connection shared with a child made without fork(): glibc's
 * syscall(SYS_clone, SIGCHLD) (as vsftpd starts its sessions) and its
 * clone() with a stack of its own.  The parent closes its copy at once;
 * the child still talks over the connection, as on kernel TCP, and the
 * peer reads end of stream only once the child closed too.
 * usage: raw_clone */
#include "ptest.h" /* first: it defines _GNU_SOURCE, which clone() needs */

#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int g_child_fd;

/* The child's side: "child", then wait for "reply", answer "bye". */
static int child_talks(void* unused) {
  (void)unused;
  char buf[8];
  write_all(g_child_fd, "child", 5);
  read_exact(g_child_fd, buf, 5);
  if (memcmp(buf, "reply", 5) != 0) return 2;
  write_all(g_child_fd, "bye", 3);
  close(g_child_fd);
  return 0;
}

static void run_case(int use_glibc_clone) {
  int c, s;
  make_pair(&c, &s);
  char buf[8];
  write_all(c, "x", 1); /* the connection is in use before the clone */
  read_exact(s, buf, 1);
  g_child_fd = s;
  pid_t pid;
  static char stack[256 * 1024];
  if (use_glibc_clone) {
    pid = clone(child_talks, stack + sizeof(stack), SIGCHLD, NULL);
  } else {
    pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(child_talks(NULL));
  }
  CHECK(pid > 0);
  CHECK(close(s) == 0); /* the parent's copy goes at once, as vsftpd's */
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "child", 5) == 0);
  write_all(c, "reply", 5);
  read_exact(c, buf, 3);
  CHECK(memcmp(buf, "bye", 3) == 0);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(c, buf, 1), 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(close(c) == 0);
}

int main(void) {
  ptest_start(30);
  signal(SIGPIPE, SIG_IGN);
  run_case(0);
  run_case(1);
  printf("PASS\n");
  return 0;
}
