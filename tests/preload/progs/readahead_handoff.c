/* A connection read in small pieces, then shared: every byte reaches
 * exactly one reader, in order.  Written for toe's read-ahead window
 * (toe_backend/uring_engine.h), which holds copies of bytes still queued
 * in the kernel; on kernel TCP it checks the same promises.
 *  1. After 5 reads of 100 bytes FIONREAD counts exactly the rest; the
 *     process forks; the child reads the rest (offsets 500..20000) and
 *     then finds the socket empty; the parent's copy still works.
 *  2. After 5 reads of 100 bytes on a socket without FD_CLOEXEC the
 *     process execs itself; the new image reads exactly offsets
 *     500..20000 from the inherited number and answers over it.
 * usage: readahead_handoff [fork-only | exec-child S C]
 * fork-only: part 1 only, then PASS (the process exits normally, so
 * VSOCKET_STATS shows what it did). */
#include "ptest.h"

#include <sys/ioctl.h>
#include <sys/wait.h>

enum { kTotal = 20000, kHead = 500 };

static int readable(int fd) {
  int n = -1;
  CHECK(ioctl(fd, FIONREAD, &n) == 0);
  return n;
}

/* Sends the pattern's first kTotal bytes on c, waits until s has them all
 * queued, then reads 5 x 100 bytes from s. */
static void fill_and_nibble(int c, int s) {
  static unsigned char buf[kTotal];
  fill_pattern(buf, kTotal, 0);
  write_all(c, buf, kTotal);
  for (int i = 0; i < 3000 && readable(s) < kTotal; ++i) sleep_ms(1);
  CHECK_EQ(readable(s), kTotal);
  for (int i = 0; i < kHead / 100; ++i) {
    CHECK_EQ(read(s, buf, 100), 100);
    CHECK(check_pattern(buf, 100, (uint64_t)i * 100));
  }
  CHECK_EQ(readable(s), kTotal - kHead);
  CHECK(wait_for(s, POLLIN, 0) & POLLIN);
}

/* Reads offsets kHead..kTotal from s, then finds it empty. */
static void read_rest(int s) {
  static unsigned char buf[kTotal];
  read_exact(s, buf, kTotal - kHead);
  CHECK(check_pattern(buf, kTotal - kHead, kHead));
  CHECK_EQ(readable(s), 0);
  CHECK_EQ(wait_for(s, POLLIN, 0) & POLLIN, 0);
}

static int exec_child(int s, int c) {
  read_rest(s);
  CHECK_EQ(write(s, "ok", 2), 2);
  char buf[2];
  read_exact(c, buf, 2);
  CHECK(memcmp(buf, "ok", 2) == 0);
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  ptest_start(30);
  if (argc == 4 && !strcmp(argv[1], "exec-child"))
    return exec_child(atoi(argv[2]), atoi(argv[3]));
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(len > 0);
  self[len] = '\0';

  /* 1. fork */
  int c, s;
  make_pair(&c, &s);
  CHECK(fcntl(s, F_SETFD, FD_CLOEXEC) == 0);
  fill_and_nibble(c, s);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    read_rest(s);
    _exit(0);
  }
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ(readable(s), 0);
  CHECK_EQ(write(c, "more", 4), 4);
  char buf[4];
  read_exact(s, buf, 4);
  CHECK(memcmp(buf, "more", 4) == 0);
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);
  if (argc == 2 && !strcmp(argv[1], "fork-only")) {
    printf("PASS\n");
    return 0;
  }

  /* 2. exec, the sockets inherited */
  make_pair(&c, &s);
  CHECK_EQ(fcntl(s, F_GETFD) & FD_CLOEXEC, 0);
  fill_and_nibble(c, s);
  char s_arg[16], c_arg[16];
  snprintf(s_arg, sizeof(s_arg), "%d", s);
  snprintf(c_arg, sizeof(c_arg), "%d", c);
  fflush(stdout);
  execl(self, self, "exec-child", s_arg, c_arg, (char*)NULL);
  CHECK(!"execl failed");
  return 1;
}
