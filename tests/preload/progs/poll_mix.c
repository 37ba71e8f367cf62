/* poll and select over a connection beside a pipe, as the kernel answers
 * them for TCP; under vsocket the connection's part comes from its rings.
 *   poll     each member reports alone and together (a kernel member may
 *            come one look after a ready connection); timeout 0 finds
 *            nothing; end of stream gives POLLIN|POLLRDHUP, both ways shut
 *            POLLHUP; an fd of -1 is skipped, a closed one is POLLNVAL
 *   select   read and write sets, the time left in *timeout, EBADF for a
 *            closed descriptor beside a ready connection (POLLNVAL and
 *            EBADF, like any kernel member's state, may come one look late)
 * usage: poll_mix poll|select */
#define _GNU_SOURCE
#include "ptest.h"

#include <sys/select.h>

static void test_poll(void) {
  int c, s, p[2];
  make_pair(&c, &s);
  CHECK(pipe(p) == 0);
  struct pollfd fds[3] = {{s, POLLIN, 0}, {p[0], POLLIN, 0}, {-1, POLLIN, 0}};
  CHECK_EQ(poll(fds, 3, 0), 0);
  CHECK_EQ(poll(fds, 3, 30), 0);
  for (int round = 0; round < 20; ++round) {
    CHECK_EQ(write(c, "x", 1), 1);
    CHECK_EQ(poll(fds, 3, 2000), 1);
    CHECK_EQ(fds[0].revents, POLLIN);
    CHECK_EQ(fds[1].revents, 0);
    CHECK_EQ(fds[2].revents, 0);
    CHECK_EQ(write(p[1], "p", 1), 1);
    /* Both report; the kernel's members may come a look later than a
     * ready ring (at most 64 µs: docs/COMPATIBILITY.md). */
    short seen0 = 0, seen1 = 0;
    for (int64_t end = now_ms() + 2000; !(seen0 && seen1) && now_ms() < end;) {
      int n = poll(fds, 3, 2000);
      CHECK(n >= 1 && n <= 2);
      CHECK_EQ(fds[0].revents, POLLIN); /* level-triggered: every time */
      seen0 |= fds[0].revents;
      seen1 |= fds[1].revents;
      CHECK_EQ(fds[2].revents, 0);
    }
    CHECK_EQ(seen1, POLLIN);
    char b;
    CHECK_EQ(read(s, &b, 1), 1);
    CHECK_EQ(poll(fds, 3, 2000), 1);
    CHECK_EQ(fds[0].revents, 0);
    CHECK_EQ(fds[1].revents, POLLIN);
    CHECK_EQ(read(p[0], &b, 1), 1);
    CHECK_EQ(poll(fds, 3, 0), 0);
  }
  /* Writable, and both. */
  struct pollfd w[2] = {{s, POLLIN | POLLOUT, 0}, {p[1], POLLOUT, 0}};
  short wseen = 0;
  for (int64_t end = now_ms() + 2000; !wseen && now_ms() < end;) {
    CHECK(poll(w, 2, 2000) >= 1);
    CHECK_EQ(w[0].revents, POLLOUT);
    wseen |= w[1].revents;
  }
  CHECK_EQ(wseen, POLLOUT);
  /* A closed descriptor beside the connection. */
  int dead = dup(p[0]);
  CHECK(dead >= 0);
  close(dead);
  struct pollfd bad[2] = {{s, POLLOUT, 0}, {dead, POLLIN, 0}};
  short nval = 0;
  for (int64_t end = now_ms() + 2000; !nval && now_ms() < end;) {
    int n = poll(bad, 2, 2000);
    CHECK_EQ(bad[0].revents, POLLOUT);
    nval = bad[1].revents;
    CHECK_EQ(n, nval ? 2 : 1);
  }
  CHECK_EQ(nval, POLLNVAL);
  /* End of stream, then both ways shut. */
  CHECK(shutdown(c, SHUT_WR) == 0);
  struct pollfd e = {s, POLLIN | POLLRDHUP, 0};
  CHECK_EQ(poll(&e, 1, 2000), 1);
  CHECK_EQ(e.revents, POLLIN | POLLRDHUP);
  CHECK(shutdown(s, SHUT_WR) == 0);
  int64_t end = now_ms() + 2000;
  do {
    CHECK_EQ(poll(&e, 1, 100), 1);
  } while (!(e.revents & POLLHUP) && now_ms() < end);
  CHECK_EQ(e.revents, POLLIN | POLLRDHUP | POLLHUP);
  close(c);
  close(s);
  close(p[0]);
  close(p[1]);
}

static void test_select(void) {
  int c, s, p[2];
  make_pair(&c, &s);
  CHECK(pipe(p) == 0);
  int nfds = (s > p[0] ? s : p[0]) + 1;
  for (int round = 0; round < 20; ++round) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(p[0], &r);
    struct timeval tv = {0, 20000};
    CHECK_EQ(select(nfds, &r, NULL, NULL, &tv), 0);
    CHECK_EQ(write(c, "y", 1), 1);
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(p[0], &r);
    tv.tv_sec = 2;
    tv.tv_usec = 0;
    CHECK_EQ(select(nfds, &r, NULL, NULL, &tv), 1);
    CHECK(FD_ISSET(s, &r));
    CHECK(!FD_ISSET(p[0], &r));
    /* Linux leaves the time left in *timeout. */
    CHECK(tv.tv_sec <= 2 && (tv.tv_sec > 0 || tv.tv_usec > 0));
    char b;
    CHECK_EQ(read(s, &b, 1), 1);
  }
  /* Read and write sets together: the connection counts once per set. */
  CHECK_EQ(write(c, "z", 1), 1);
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(s, &r);
  FD_SET(s, &w);
  FD_SET(p[1], &w);
  int n2 = (s > p[1] ? s : p[1]) + 1;
  int pipe_seen = 0;
  for (int64_t end = now_ms() + 2000; !pipe_seen && now_ms() < end;) {
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(s, &r);
    FD_SET(s, &w);
    FD_SET(p[1], &w);
    int n = select(n2, &r, &w, NULL, NULL);
    CHECK(FD_ISSET(s, &r) && FD_ISSET(s, &w));
    pipe_seen = FD_ISSET(p[1], &w);
    CHECK_EQ(n, 2 + pipe_seen);
  }
  CHECK(pipe_seen);
  /* A closed descriptor in the set is EBADF, even beside a ready one. */
  int dead = dup(p[0]);
  CHECK(dead >= 0);
  close(dead);
  FD_ZERO(&r);
  FD_SET(s, &r);
  FD_SET(dead, &r);
  int n3 = (s > dead ? s : dead) + 1;
  int rc = 0;
  for (int64_t end = now_ms() + 2000; rc >= 0 && now_ms() < end;) {
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(dead, &r);
    struct timeval tv = {1, 0};
    rc = select(n3, &r, NULL, NULL, &tv);
    CHECK(rc == 1 || (rc == -1 && errno == EBADF));
  }
  CHECK_EQ(rc, -1);
  close(c);
  close(s);
  close(p[0]);
  close(p[1]);
}

int main(int argc, char** argv) {
  ptest_start(30);
  CHECK(argc == 2);
  if (!strcmp(argv[1], "poll")) test_poll();
  else if (!strcmp(argv[1], "select")) test_select();
  else CHECK(!"unknown mode");
  printf("PASS\n");
  return 0;
}
