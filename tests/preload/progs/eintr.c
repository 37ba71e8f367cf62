/* A signal interrupts blocked socket calls as POSIX says: without
 * SA_RESTART, recv/read/send return -1 EINTR; with SA_RESTART, a recv with
 * no timeout is restarted and returns the data.
 * usage: eintr [norestart|restart] */
#include "ptest.h"

static volatile sig_atomic_t g_signals;
static void on_signal(int sig) {
  (void)sig;
  g_signals++;
}

struct call {
  int fd;
  int op; /* 0 recv, 1 read, 2 send */
  ssize_t result;
  int err;
  int64_t returned_at;
};

static void* blocked_call(void* arg) {
  struct call* c = arg;
  static char buf[65536];
  errno = 0;
  if (c->op == 0) c->result = recv(c->fd, buf, sizeof(buf), 0);
  if (c->op == 1) c->result = read(c->fd, buf, sizeof(buf));
  if (c->op == 2) c->result = send(c->fd, buf, sizeof(buf), 0);
  c->err = errno;
  c->returned_at = now_ms();
  return NULL;
}

/* Starts `op` on fd in a thread, signals it after 200 ms; returns when the
 * call has returned (or the test's alarm fires). */
static struct call interrupt(int fd, int op, int then_write_fd) {
  struct call c = {fd, op, 0, 0, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, blocked_call, &c) == 0);
  sleep_ms(200);
  int64_t signalled_at = now_ms();
  CHECK(pthread_kill(t, SIGUSR1) == 0);
  if (then_write_fd >= 0) {
    sleep_ms(200);
    CHECK_EQ(write(then_write_fd, "data", 4), 4);
  }
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(c.returned_at >= signalled_at);
  return c;
}

int main(int argc, char** argv) {
  ptest_start(30);
  int restart = argc > 1 && strcmp(argv[1], "restart") == 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = restart ? SA_RESTART : 0;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  int c, s;
  make_pair(&c, &s);

  if (!restart) {
    struct call r = interrupt(s, 0, -1);
    CHECK_EQ(r.result, -1);
    CHECK_EQ(r.err, EINTR);
    r = interrupt(s, 1, -1);
    CHECK_EQ(r.result, -1);
    CHECK_EQ(r.err, EINTR);
    /* The socket still works afterwards. */
    CHECK_EQ(write(c, "ok", 2), 2);
    char buf[8];
    CHECK_EQ(read(s, buf, sizeof(buf)), 2);
    /* A send blocked on a full socket. */
    set_nonblocking(c, 1);
    static char fill[65536];
    while (write(c, fill, sizeof(fill)) > 0) {
    }
    CHECK_EQ(errno, EAGAIN);
    set_nonblocking(c, 0);
    r = interrupt(c, 2, -1);
    CHECK_EQ(r.result, -1);
    CHECK_EQ(r.err, EINTR);
    printf("signals=%d\n", (int)g_signals);
    CHECK_EQ(g_signals, 3);
  } else {
    /* The application sees its own handler and flags. */
    struct sigaction q;
    CHECK(sigaction(SIGUSR1, NULL, &q) == 0);
    CHECK(q.sa_handler == on_signal);
    CHECK(q.sa_flags & SA_RESTART);
    CHECK(!(q.sa_flags & SA_SIGINFO));
    struct call r = interrupt(s, 0, c);
    printf("restart_result=%zd errno=%d\n", r.result, r.err);
    CHECK_EQ(g_signals, 1);
    CHECK_EQ(r.result, 4);
    /* A send blocked on a full socket is restarted and completes once the
     * reader drains. */
    set_nonblocking(c, 1);
    static char fill[65536];
    long queued = 0;
    ssize_t n;
    while ((n = write(c, fill, sizeof(fill))) > 0) queued += n;
    CHECK_EQ(errno, EAGAIN);
    set_nonblocking(c, 0);
    struct call w = {c, 2, 0, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, blocked_call, &w) == 0);
    sleep_ms(200);
    CHECK(pthread_kill(t, SIGUSR1) == 0);
    sleep_ms(200);
    static char sink[65536];
    long drained = 0;
    while (drained < queued + (long)sizeof(fill)) {
      n = read(s, sink, sizeof(sink));
      CHECK(n > 0);
      drained += n;
    }
    CHECK(pthread_join(t, NULL) == 0);
    printf("restart_send=%zd\n", w.result);
    CHECK_EQ(w.result, (ssize_t)sizeof(fill));
    CHECK_EQ(g_signals, 2);
    /* signal() installs a BSD handler, which restarts too. */
    CHECK(signal(SIGUSR1, on_signal) != SIG_ERR);
    r = interrupt(s, 1, c);
    CHECK_EQ(r.result, 4);
    CHECK_EQ(g_signals, 3);
    /* With a receive timeout set, the kernel never restarts: EINTR. */
    struct timeval tv = {5, 0};
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
    r = interrupt(s, 0, -1);
    CHECK_EQ(r.result, -1);
    CHECK_EQ(r.err, EINTR);
    CHECK_EQ(g_signals, 4);
    printf("restart_checks=ok\n");
  }
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
