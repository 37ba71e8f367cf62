/* Registration changes on a busy-polled epoll set, as event loops make them
 * around every write (redis-benchmark: DEL, ADD, MOD per request), each
 * checked against what the kernel does for TCP.  Under vsocket these
 * changes reach the kernel lazily (preload/epoll_deferred_mod.h):
 *   cycle    200 rounds of DEL + ADD(EPOLLOUT), DEL + ADD(EPOLLIN), a
 *            MOD to the same mask: each wait reports exactly what is
 *            registered and ready, nothing after a DEL; then the peer's
 *            shutdown shows EPOLLRDHUP through a registration added last
 *   sleeper  a thread asleep in epoll_wait wakes when another thread MODs
 *            the registration to EPOLLOUT (already writable)
 *   nested   a set whose registration was just changed is put into an
 *            outer set: the outer reports it at once
 * usage: epoll_changes MODE */
#include "ptest.h"

#include <sys/epoll.h>

static void ctl(int ep, int op, int fd, uint32_t events) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.fd = fd;
  CHECK(epoll_ctl(ep, op, fd, op == EPOLL_CTL_DEL ? NULL : &ev) == 0);
}

/* One epoll_wait on `ep`: the events of `fd` (0: not reported); fails on
 * any other report. */
static uint32_t wait_fd(int ep, int fd, int timeout_ms) {
  struct epoll_event evs[4];
  int n = epoll_wait(ep, evs, 4, timeout_ms);
  CHECK(n >= 0 && n <= 1);
  if (n == 0) return 0;
  CHECK_EQ(evs[0].data.fd, fd);
  return evs[0].events;
}

static void test_cycle(void) {
  int c, s;
  make_pair(&c, &s);
  int ep = epoll_create1(0);
  ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN);
  char b;
  for (int round = 0; round < 200; ++round) {
    ctl(ep, EPOLL_CTL_DEL, s, 0);
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), ENOENT);
    ctl(ep, EPOLL_CTL_ADD, s, EPOLLOUT);
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, s, &(struct epoll_event){.events = EPOLLIN}),
              EEXIST);
    CHECK_EQ(wait_fd(ep, s, 2000), EPOLLOUT);
    ctl(ep, EPOLL_CTL_DEL, s, 0);
    CHECK_EQ(wait_fd(ep, s, 0), 0);
    ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN);
    CHECK_EQ(wait_fd(ep, s, round % 3 == 0 ? 5 : 0), 0); /* nothing to read */
    CHECK_EQ(write(c, "r", 1), 1);
    CHECK_EQ(wait_fd(ep, s, 2000), EPOLLIN);
    ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN);
    CHECK_EQ(wait_fd(ep, s, 2000), EPOLLIN); /* still unread */
    CHECK_EQ(read(s, &b, 1), 1);
    CHECK_EQ(wait_fd(ep, s, 0), 0);
  }
  ctl(ep, EPOLL_CTL_DEL, s, 0);
  ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLRDHUP);
  CHECK(shutdown(c, SHUT_WR) == 0);
  uint32_t ev = 0;
  for (int64_t end = now_ms() + 2000; !(ev & EPOLLRDHUP) && now_ms() < end;)
    ev = wait_fd(ep, s, 100);
  CHECK_EQ(ev, EPOLLIN | EPOLLRDHUP);
  close(ep);
  close(c);
  close(s);
}

struct sleeper {
  int ep, fd;
  uint32_t events;
};

static void* sleep_thread(void* arg) {
  struct sleeper* w = arg;
  w->events = wait_fd(w->ep, w->fd, 5000);
  return NULL;
}

static void test_sleeper(void) {
  int c, s;
  make_pair(&c, &s);
  for (int round = 0; round < 10; ++round) {
    int ep = epoll_create1(0);
    ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN);
    struct sleeper w = {ep, s, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sleep_thread, &w) == 0);
    sleep_ms(30 + round * 5); /* past any spin budget: asleep in the kernel */
    int64_t start = now_ms();
    ctl(ep, EPOLL_CTL_MOD, s, EPOLLOUT);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_EQ(w.events, EPOLLOUT);
    CHECK(now_ms() - start < 1000);
    close(ep);
  }
  char b; /* and the connection carries data */
  CHECK_EQ(write(c, "d", 1), 1);
  CHECK_EQ(read(s, &b, 1), 1);
  close(c);
  close(s);
}

static void test_nested(void) {
  int c, s;
  make_pair(&c, &s);
  int inner = epoll_create1(0);
  ctl(inner, EPOLL_CTL_ADD, s, EPOLLIN);
  CHECK_EQ(wait_fd(inner, s, 0), 0); /* a wait: the set is in use */
  ctl(inner, EPOLL_CTL_MOD, s, EPOLLOUT); /* writable at once */
  int outer = epoll_create1(0);
  ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN);
  CHECK_EQ(wait_fd(outer, inner, 2000), EPOLLIN);
  CHECK_EQ(wait_fd(inner, s, 0), EPOLLOUT);
  ctl(inner, EPOLL_CTL_MOD, s, EPOLLIN); /* nothing to read: not ready */
  CHECK_EQ(wait_fd(outer, inner, 50), 0);
  CHECK_EQ(write(c, "n", 1), 1);
  CHECK_EQ(wait_fd(outer, inner, 2000), EPOLLIN);
  char b;
  CHECK_EQ(read(s, &b, 1), 1);
  close(outer);
  close(inner);
  close(c);
  close(s);
}

int main(int argc, char** argv) {
  ptest_start(30);
  CHECK(argc == 2);
  const char* m = argv[1];
  if (!strcmp(m, "cycle")) test_cycle();
  else if (!strcmp(m, "sleeper")) test_sleeper();
  else if (!strcmp(m, "nested")) test_nested();
  else CHECK(!"unknown mode");
  printf("PASS\n");
  return 0;
}
