/* exec with connections open.
 *  - A forked child that execs no longer holds the parent's connections:
 *    when the parent closes one, the peer sees EOF.
 *  - A connection the new image inherits (no FD_CLOEXEC) cannot be carried
 *    over on shared memory; it must fail cleanly (ECONNRESET then EOF, or
 *    work, on kernel TCP), never hand out wake-up bytes as data or crash.
 * usage: exec_inherit [child FD] */
#include "ptest.h"

#include <sys/wait.h>

static int child(int fd) {
  char buf[64];
  errno = 0;
  ssize_t n = read(fd, buf, sizeof(buf));
  int err = errno;
  printf("child_read=%zd errno=%s\n", n, n < 0 ? strerror(err) : "0");
  if (n < 0) {
    CHECK_EQ(err, ECONNRESET);
    CHECK_EQ(read(fd, buf, sizeof(buf)), 0);
    CHECK_ERR(send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
  } else {
    /* On kernel TCP the inherited socket is just a socket: the parent
     * sent "tcp!" for us to read. */
    CHECK_EQ(n, 4);
    CHECK(memcmp(buf, "tcp!", 4) == 0);
  }
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
  const char* mode = getenv("PTEST_MODE");
  int tcp = !mode || strcmp(mode, "shm") != 0;
  if (tcp) CHECK_EQ(write(c, "tcp!", 4), 4);
  run_child(self, s);
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
