/* Duplicated connection descriptors: dup, dup2, dup3, F_DUPFD and
 * F_DUPFD_CLOEXEC all name the same connection; closing the original while
 * a copy stays open keeps the connection (bash's `exec 5<>/dev/tcp/...`
 * does exactly that); the connection ends when its last number is closed;
 * dup2 onto a connection's number closes that number. */
#include "ptest.h"

static void roundtrip(int a, int b, const char* tag) {
  char buf[64];
  size_t n = strlen(tag);
  CHECK_EQ(write(a, tag, n), (ssize_t)n);
  CHECK(wait_for(b, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(b, buf, sizeof(buf)), (ssize_t)n);
  CHECK(memcmp(buf, tag, n) == 0);
  CHECK_EQ(write(b, tag, n), (ssize_t)n);
  CHECK(wait_for(a, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(a, buf, sizeof(buf)), (ssize_t)n);
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  char buf[64];

  /* dup2 to a chosen number, then close the original. */
  CHECK_EQ(dup2(c, 50), 50);
  CHECK_EQ(fcntl(50, F_GETFD) & FD_CLOEXEC, 0);
  roundtrip(50, s, "via50");
  roundtrip(c, s, "viaorig");
  CHECK(close(c) == 0);
  CHECK_ERR(write(c, "x", 1), EBADF);
  roundtrip(50, s, "after-close");
  /* Non-blocking mode belongs to the open file, shared by the copies. */
  int d = dup(50);
  CHECK(d >= 0);
  set_nonblocking(d, 1);
  CHECK(fcntl(50, F_GETFL) & O_NONBLOCK);
  CHECK_ERR(read(50, buf, sizeof(buf)), EAGAIN);
  set_nonblocking(50, 0);
  CHECK(close(50) == 0);
  roundtrip(d, s, "second-move");

  /* F_DUPFD, F_DUPFD_CLOEXEC, dup3(O_CLOEXEC) on the server end. */
  int f1 = fcntl(s, F_DUPFD, 100);
  CHECK(f1 >= 100);
  CHECK_EQ(fcntl(f1, F_GETFD) & FD_CLOEXEC, 0);
  int f2 = fcntl(s, F_DUPFD_CLOEXEC, 200);
  CHECK(f2 >= 200);
  CHECK(fcntl(f2, F_GETFD) & FD_CLOEXEC);
  CHECK_EQ(dup3(s, 60, O_CLOEXEC), 60);
  CHECK(fcntl(60, F_GETFD) & FD_CLOEXEC);
  CHECK_ERR(dup3(s, s, 0), EINVAL);
  CHECK_EQ(dup2(s, s), s);
  roundtrip(d, f1, "f1");
  roundtrip(d, f2, "f2");
  roundtrip(d, 60, "60");
  /* Closing all but one copy keeps the connection open... */
  CHECK(close(s) == 0);
  CHECK(close(f1) == 0);
  CHECK(close(60) == 0);
  roundtrip(d, f2, "last-copy");
  CHECK_EQ(wait_for(d, POLLIN, 100), 0);
  /* ... closing the last one ends it: the peer sees EOF. */
  CHECK(close(f2) == 0);
  CHECK(wait_for(d, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(d, buf, sizeof(buf)), 0);
  close(d);

  /* dup2 of a pipe onto a connection's only number closes the connection
   * and the number now reads from the pipe. */
  make_pair(&c, &s);
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK_EQ(dup2(p[0], s), s);
  CHECK(wait_for(c, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK_EQ(write(p[1], "pipe", 4), 4);
  CHECK_EQ(read(s, buf, sizeof(buf)), 4);
  CHECK(memcmp(buf, "pipe", 4) == 0);
  close(s);
  close(p[0]);
  close(p[1]);
  close(c);

  /* dup2 of one connection onto another's number. */
  int c1, s1, c2, s2;
  make_pair(&c1, &s1);
  make_pair(&c2, &s2);
  CHECK_EQ(dup2(c1, c2), c2);
  CHECK(wait_for(s2, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(s2, buf, sizeof(buf)), 0);  /* c2's connection ended */
  roundtrip(c2, s1, "c2-is-c1");
  close(c1);
  roundtrip(c2, s1, "still-c1");
  close(c2);
  CHECK(wait_for(s1, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(s1, buf, sizeof(buf)), 0);
  close(s1);
  close(s2);

  /* A listening socket's copy accepts too. */
  int l = listen_on("127.0.0.1");
  int l2 = dup(l);
  CHECK(close(l) == 0);
  c = connect_to("127.0.0.1", port_of(l2));
  s = accept(l2, NULL, NULL);
  CHECK(s >= 0);
  roundtrip(c, s, "listener-copy");
  close(c);
  close(s);
  close(l2);
  printf("PASS\n");
  return 0;
}
