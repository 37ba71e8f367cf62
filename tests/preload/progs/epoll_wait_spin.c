/* epoll_wait, epoll_pwait and epoll_pwait2 keep the kernel's semantics on a
 * set holding a shared-memory connection, where the interposer busy-polls
 * before sleeping (preload/epoll_spin.h): timeouts are honoured, data is
 * reported, a signal the sigmask unblocks interrupts with EINTR, an invalid
 * timeout is EINVAL, and a set without virtual sockets behaves the same. */
#include "ptest.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

static volatile sig_atomic_t g_signals;
static void on_signal(int sig) {
  (void)sig;
  g_signals++;
}

static int add(int ep, int fd) {
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static void check_set(int ep, int c, int s) {
  struct epoll_event out[4];
  /* Timeouts: nothing ready. */
  int64_t t0 = now_ms();
  CHECK_EQ(epoll_wait(ep, out, 4, 50), 0);
  CHECK(now_ms() - t0 >= 49);
  t0 = now_ms();
  CHECK_EQ(epoll_pwait(ep, out, 4, 30, NULL), 0);
  CHECK(now_ms() - t0 >= 29);
  struct timespec ts = {0, 30 * 1000000};
  t0 = now_ms();
  CHECK_EQ(epoll_pwait2(ep, out, 4, &ts, NULL), 0);
  CHECK(now_ms() - t0 >= 29);
  struct timespec bad = {0, 1000000000};
  CHECK_ERR(epoll_pwait2(ep, out, 4, &bad, NULL), EINVAL);
  CHECK_EQ(epoll_wait(ep, out, 4, 0), 0);
  /* Data is reported, by every variant. */
  CHECK_EQ(write(s, "x", 1), 1);
  CHECK_EQ(epoll_wait(ep, out, 4, -1), 1);
  CHECK_EQ(out[0].data.fd, c);
  CHECK_EQ(epoll_pwait(ep, out, 4, 1000, NULL), 1);
  CHECK_EQ(epoll_pwait2(ep, out, 4, NULL, NULL), 1);
  char b;
  CHECK_EQ(read(c, &b, 1), 1);
  CHECK_EQ(epoll_wait(ep, out, 4, 20), 0);
  /* A pending signal the sigmask unblocks interrupts at once. */
  sigset_t block, empty;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigemptyset(&empty);
  CHECK(pthread_sigmask(SIG_BLOCK, &block, NULL) == 0);
  CHECK(raise(SIGUSR1) == 0);
  int before = g_signals;
  t0 = now_ms();
  CHECK_ERR(epoll_pwait(ep, out, 4, 5000, &empty), EINTR);
  CHECK(now_ms() - t0 < 2000);
  CHECK_EQ(g_signals, before + 1);
  CHECK(raise(SIGUSR1) == 0);
  CHECK_ERR(epoll_pwait2(ep, out, 4, NULL, &empty), EINTR);
  CHECK_EQ(g_signals, before + 2);
  CHECK(pthread_sigmask(SIG_UNBLOCK, &block, NULL) == 0);
}

int main(void) {
  ptest_start(30);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

  int c, s;
  make_pair(&c, &s);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  CHECK(add(ep, c) == 0);
  int efd = eventfd(0, EFD_CLOEXEC);
  CHECK(efd >= 0);
  CHECK(add(ep, efd) == 0);
  check_set(ep, c, s);
  /* The eventfd next to the connection is reported too. */
  uint64_t one = 1;
  CHECK_EQ(write(efd, &one, sizeof(one)), sizeof(one));
  struct epoll_event out[4];
  CHECK_EQ(epoll_wait(ep, out, 4, 1000), 1);
  CHECK_EQ(out[0].data.fd, efd);
  CHECK_EQ(read(efd, &one, sizeof(one)), sizeof(one));
  close(ep);

  /* The same number reused for a set without virtual sockets. */
  int p[2];
  CHECK(pipe(p) == 0);
  int ep2 = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep2 >= 0);
  CHECK(add(ep2, p[0]) == 0);
  int64_t t0 = now_ms();
  CHECK_EQ(epoll_wait(ep2, out, 4, 30), 0);
  CHECK(now_ms() - t0 >= 29);
  CHECK_EQ(write(p[1], "y", 1), 1);
  CHECK_EQ(epoll_wait(ep2, out, 4, -1), 1);
  CHECK_EQ(out[0].data.fd, p[0]);
  close(ep2);

  /* The connection still carries data both ways. */
  CHECK_EQ(write(c, "ping", 4), 4);
  char buf[8];
  CHECK_EQ(read(s, buf, sizeof(buf)), 4);
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
