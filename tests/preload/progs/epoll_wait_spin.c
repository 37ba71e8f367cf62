/* epoll_wait, epoll_pwait and epoll_pwait2 keep the kernel's semantics on a
 * set holding a shared-memory connection, where the interposer busy-polls
 * before sleeping (preload/epoll_spin.h): timeouts are honoured, data is
 * reported, a signal the sigmask unblocks interrupts with EINTR, an invalid
 * timeout is EINVAL, and a set without virtual sockets behaves the same.
 * With the argument "signal-in-spin" (run with a long VSOCKET_SPIN_US): a
 * signal whose handler runs while epoll_wait busy-polls ends the call with
 * EINTR at once, as the kernel's sleep would (nginx set its terminate flag
 * in such a handler and went back to sleep: SIGTERM was ignored). */
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

struct kill_later {
  pthread_t target;
  int delay_ms;
};

static void* kill_later_thread(void* arg) {
  struct kill_later* k = arg;
  usleep((useconds_t)k->delay_ms * 1000);
  pthread_kill(k->target, SIGUSR1);
  return NULL;
}

/* Nothing is ready; a signal arrives 50 ms in.  The kernel returns EINTR
 * then; so must a wait that is still busy-polling. */
static void signal_in_spin(int ep) {
  struct epoll_event out[4];
  struct kill_later k = {pthread_self(), 50};
  pthread_t t;
  int before = g_signals;
  int64_t t0 = now_ms();
  CHECK(pthread_create(&t, NULL, kill_later_thread, &k) == 0);
  CHECK_ERR(epoll_wait(ep, out, 4, 5000), EINTR);
  int64_t took = now_ms() - t0;
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_EQ(g_signals, before + 1);
  CHECK(took < 500);  /* not the 1 s spin budget, not the 5 s timeout */
}

int main(int argc, char** argv) {
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
  if (argc > 1 && strcmp(argv[1], "signal-in-spin") == 0) {
    signal_in_spin(ep);
    CHECK_EQ(write(c, "ping", 4), 4);
    char buf[8];
    CHECK_EQ(read(s, buf, sizeof(buf)), 4);
    close(ep);
    close(c);
    close(s);
    printf("PASS\n");
    return 0;
  }
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
