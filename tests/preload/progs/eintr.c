/* A signal interrupts blocked socket calls as POSIX says: without
 * SA_RESTART, recv/read/send return -1 EINTR; with SA_RESTART, a recv with
 * no timeout is restarted and returns the data.  "waits": a signal at any
 * moment of an epoll_wait, poll or select -- during vsocket's spin, at its
 * end, or in the kernel's sleep -- ends the call with EINTR (a handler
 * that ran just before the sleep once left nginx asleep after SIGTERM).
 * usage: eintr [norestart|restart|waits] */
#include <sched.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>

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

/* ---- "waits" ---- */

enum { kWaitEpoll, kWaitPoll, kWaitSelect };
static const char* const kWaitNames[] = {"epoll_wait", "poll", "select"};
enum { kWaitRounds = 1000 };

/* Set by the waiter from just before it announces a round until just
 * before it calls: a signal that lands there is the program's own race
 * (the kernel would sleep too), and only then is a second one sent. */
static volatile sig_atomic_t g_in_prologue;
static volatile sig_atomic_t g_early_signals;
static void on_wait_signal(int sig) {
  (void)sig;
  if (g_in_prologue) g_early_signals++;
}

struct waiter {
  int fd, epfd, kind;
  atomic_int entering; /* round about to wait */
  atomic_int returned; /* rounds that returned */
  int bad_result, bad_errno;
};

static void* wait_rounds(void* arg) {
  struct waiter* w = arg;
  /* Between announcing a round and entering the call the waiter must not
   * be preempted (a signal landing there is the program's own race, which
   * the kernel has too): real-time priority keeps a CPU hog off it (root;
   * otherwise it stays as it was).  The first calls resolve the symbols
   * and set vsocket up, which takes tens of microseconds once. */
  struct sched_param rt = {.sched_priority = 1};
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
  {
    struct epoll_event ev;
    struct pollfd pfd = {w->fd, POLLIN, 0};
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(w->fd, &rd);
    struct timeval zero = {0, 0};
    epoll_wait(w->epfd, &ev, 1, 0);
    poll(&pfd, 1, 0);
    select(w->fd + 1, &rd, NULL, NULL, &zero);
  }
  for (int round = 1; round <= kWaitRounds; ++round) {
    g_in_prologue = 1;
    atomic_store(&w->entering, round);
    int r;
    struct epoll_event ev;
    struct pollfd pfd = {w->fd, POLLIN, 0};
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(w->fd, &rd);
    errno = 0;
    if (w->kind == kWaitEpoll) {
      g_in_prologue = 0;
      r = epoll_wait(w->epfd, &ev, 1, -1);
    } else if (w->kind == kWaitPoll) {
      g_in_prologue = 0;
      r = poll(&pfd, 1, -1);
    } else {
      g_in_prologue = 0;
      r = select(w->fd + 1, &rd, NULL, NULL, NULL);
    }
    if ((r != -1 || errno != EINTR) && w->bad_result == 0) {
      w->bad_result = r == 0 ? 1000 : r;
      w->bad_errno = errno;
    }
    atomic_store(&w->returned, round);
  }
  return NULL;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Signals each round once, 20..400 us after the waiter announced it
 * (busy-waited: the spin budget is 200 us), and waits for the round to
 * return.  A wait that outlives its signal by 10 s lost it. */
static void signal_waits(int fd, int kind) {
  struct waiter w;
  memset(&w, 0, sizeof(w));
  w.fd = fd;
  w.kind = kind;
  w.epfd = epoll_create1(EPOLL_CLOEXEC);
  CHECK(w.epfd >= 0);
  struct epoll_event ev = {EPOLLIN, {.fd = fd}};
  CHECK(epoll_ctl(w.epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_rounds, &w) == 0);
  unsigned seed = (unsigned)now_ns();
  int early_rounds = 0;
  for (int round = 1; round <= kWaitRounds; ++round) {
    while (atomic_load(&w.entering) != round) {
    }
    int64_t delay = 20000 + rand_r(&seed) % 380000;
    int64_t until = now_ns() + delay;
    while (now_ns() < until) {
    }
    int early_before = g_early_signals;
    CHECK(pthread_kill(t, SIGUSR1) == 0);
    int64_t deadline = now_ms() + 10000;
    while (atomic_load(&w.returned) != round) {
      if (g_early_signals != early_before) {
        /* It landed before the call: signal the call itself. */
        early_before = g_early_signals;
        ++early_rounds;
        sleep_ms(10);
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        deadline = now_ms() + 10000;
      }
      if (now_ms() >= deadline) {
        printf("FAIL %s round %d (delay %lld us): the signal's handler ran "
               "and the call slept on\n",
               kWaitNames[kind], round, (long long)(delay / 1000));
        exit(1);
      }
    }
  }
  CHECK(pthread_join(t, NULL) == 0);
  if (w.bad_result != 0) {
    printf("FAIL %s returned %d errno %d, not -1 EINTR\n", kWaitNames[kind],
           w.bad_result, w.bad_errno);
    exit(1);
  }
  close(w.epfd);
  printf("%s_rounds=%d early=%d\n", kWaitNames[kind], kWaitRounds, early_rounds);
}

int main(int argc, char** argv) {
  ptest_start(60);
  if (argc > 1 && strcmp(argv[1], "waits") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_wait_signal;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    int c, s;
    make_pair(&c, &s);
    for (int kind = kWaitEpoll; kind <= kWaitSelect; ++kind) signal_waits(s, kind);
    /* The connection still carries data afterwards. */
    CHECK_EQ(write(c, "ok", 2), 2);
    char buf[8];
    CHECK_EQ(read(s, buf, sizeof(buf)), 2);
    close(c);
    close(s);
    printf("PASS\n");
    return 0;
  }
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
