/* exec with connections open (execl, execlp).
 *  - A connection the new (preloaded) image inherits (no FD_CLOEXEC) keeps
 *    working there: on shared memory it is handed over, on kernel TCP the
 *    descriptor is the connection.  (progs/exec_handover.c has the rest.)
 *  - Once the child that exec'd has exited, closing the parent's copy ends
 *    the connection: the peer sees EOF.
 *  - A close-on-exec connection is released by the child's exec and stays
 *    the parent's.
 * usage: exec_inherit [child FD] */
#include "ptest.h"

#include <sys/wait.h>

static int child(int fd) {
  char buf[64];
  errno = 0;
  ssize_t n = read(fd, buf, sizeof(buf));
  int err = errno;
  printf("child_read=%zd errno=%s\n", n, n < 0 ? strerror(err) : "0");
  CHECK_EQ(n, 4);
  CHECK(memcmp(buf, "data", 4) == 0);
  CHECK_EQ(write(fd, "back", 4), 4);
  CHECK(close(fd) == 0);
  printf("PASS\n");
  return 0;
}

static void run_child(const char* self, int fd) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", fd);
    execl(self, self, "child", arg, (char*)NULL);
    _exit(127);
  }
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
}

int main(int argc, char** argv) {
  ptest_start(30);
  if (argc == 3 && !strcmp(argv[1], "child")) return child(atoi(argv[2]));
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(len > 0);
  self[len] = '\0';
  char buf[64];

  /* 1. Inherited: the child's copy of s, not the parent's. */
  int c, s;
  make_pair(&c, &s);
  CHECK_EQ(fcntl(s, F_GETFD) & FD_CLOEXEC, 0);
  CHECK_EQ(write(c, "data", 4), 4);
  run_child(self, s);
  CHECK_EQ(read(c, buf, 4), 4);
  CHECK(memcmp(buf, "back", 4) == 0);
  /* The parent's end still works both ways. */
  CHECK_EQ(write(c, "still", 5), 5);
  CHECK_EQ(read(s, buf, sizeof(buf)), 5);
  CHECK_EQ(write(s, "there", 5), 5);
  CHECK_EQ(read(c, buf, sizeof(buf)), 5);
  /* 2. The parent closes: the peer sees EOF, although a child once held
   *    the connection. */
  CHECK(close(s) == 0);
  CHECK(wait_for(c, POLLIN, 3000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  close(c);

  /* 3. Close-on-exec connections: the child execs /bin/true. */
  make_pair(&c, &s);
  CHECK(fcntl(s, F_SETFD, FD_CLOEXEC) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execlp("true", "true", (char*)NULL);
    _exit(127);
  }
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ(write(c, "ok", 2), 2);
  CHECK_EQ(read(s, buf, sizeof(buf)), 2);
  CHECK(close(s) == 0);
  CHECK(wait_for(c, POLLIN, 3000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  close(c);
  printf("PASS\n");
  return 0;
}
