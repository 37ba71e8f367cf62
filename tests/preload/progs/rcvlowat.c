/* SO_RCVLOWAT as Linux TCP applies it: poll, ppoll, select, pselect and
 * epoll report a socket readable only once the mark's bytes are queued (or
 * at end of stream), also when the bytes arrive while the call sleeps; a
 * blocking recv waits for min(mark, length) bytes, taking them as they
 * come (what it has at the timeout); a blocking MSG_PEEK waits until that
 * many are queued; a non-blocking recv takes what is there.  getsockopt
 * gives what the kernel made of the value (0 is 1), accepted sockets
 * inherit the listener's, a mark set before connect() holds after it.
 * Each observation is printed as an "OBS" line, which the driver compares
 * with a run on kernel TCP; the program checks the kernel's answers too. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>

#include "ptest.h"

static void set_lowat(int fd, int v) {
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0);
}

static int get_lowat(int fd) {
  int v = -1;
  socklen_t len = sizeof(v);
  CHECK(getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &len) == 0);
  CHECK_EQ(len, sizeof(int));
  return v;
}

static void set_rcvtimeo_ms(int fd, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
}

static int queued(int fd) {
  int n = -1;
  CHECK(ioctl(fd, FIONREAD, &n) == 0);
  return n;
}

/* ---- A helper thread that writes (or sets the mark) later ---- */

struct later {
  int fd;
  int delay_ms[3];
  const char* data[3];  /* NULL: no more steps */
  int shut;             /* shutdown(SHUT_WR) after the steps */
  int lowat_fd, lowat;  /* lowat_fd >= 0: set this mark after the steps */
  pthread_t thread;
};

static void* later_main(void* arg) {
  struct later* l = arg;
  for (int i = 0; i < 3 && l->data[i]; ++i) {
    sleep_ms(l->delay_ms[i]);
    size_t len = strlen(l->data[i]);
    CHECK_EQ(send(l->fd, l->data[i], len, 0), (long long)len);
  }
  if (l->shut) CHECK(shutdown(l->fd, SHUT_WR) == 0);
  if (l->lowat_fd >= 0) {
    sleep_ms(l->delay_ms[0]);
    set_lowat(l->lowat_fd, l->lowat);
  }
  return NULL;
}

static void later_start(struct later* l) { CHECK(pthread_create(&l->thread, NULL, later_main, l) == 0); }
static void later_join(struct later* l) { CHECK(pthread_join(l->thread, NULL) == 0); }

/* ---- The waits, each on one socket ---- */

enum { W_POLL, W_PPOLL, W_SELECT, W_PSELECT, W_EPOLL, W_COUNT };
static const char* const kWaitName[W_COUNT] = {"poll", "ppoll", "select", "pselect", "epoll"};

/* Waits up to timeout_ms for `fd` to be readable; returns the ready count
 * and in *bits what was reported (POLLIN; epoll: its events, checked to
 * carry data 42). */
static int wait_readable(int kind, int fd, int ep, int timeout_ms, unsigned* bits) {
  struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  struct pollfd p = {fd, POLLIN, 0};
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  int n = -1;
  *bits = 0;
  switch (kind) {
    case W_POLL:
      n = poll(&p, 1, timeout_ms);
      *bits = n > 0 ? (unsigned)p.revents : 0;
      break;
    case W_PPOLL:
      n = ppoll(&p, 1, &ts, NULL);
      *bits = n > 0 ? (unsigned)p.revents : 0;
      break;
    case W_SELECT:
      n = select(fd + 1, &r, NULL, NULL, &tv);
      *bits = n > 0 && FD_ISSET(fd, &r) ? POLLIN : 0;
      break;
    case W_PSELECT:
      n = pselect(fd + 1, &r, NULL, NULL, &ts, NULL);
      *bits = n > 0 && FD_ISSET(fd, &r) ? POLLIN : 0;
      break;
    case W_EPOLL: {
      struct epoll_event ev[2];
      n = epoll_wait(ep, ev, 2, timeout_ms);
      if (n > 0) {
        CHECK_EQ(n, 1);
        CHECK_EQ(ev[0].data.u64, 42);
        *bits = ev[0].events;
      }
      break;
    }
  }
  CHECK(n >= 0);
  return n;
}

/* Each wait: bytes below the mark arriving while it sleeps wake nothing,
 * the byte that reaches the mark does, end of stream below the mark is
 * readable.  Mark 10. */
static void wait_below_mark(int kind) {
  const char* name = kWaitName[kind];
  int c, s;
  make_pair(&c, &s);
  set_lowat(s, 10);
  int ep = -1;
  if (kind == W_EPOLL) {
    ep = epoll_create1(0);
    CHECK(ep >= 0);
    struct epoll_event ev = {EPOLLIN, {.u64 = 42}};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
  }
  unsigned bits;

  /* 3 then 3 more bytes arrive while the call sleeps: no event. */
  struct later l = {c, {30, 30}, {"abc", "def"}, 0, -1, 0, 0};
  later_start(&l);
  int64_t t0 = now_ms();
  int n = wait_readable(kind, s, ep, 250, &bits);
  int64_t waited = now_ms() - t0;
  later_join(&l);
  printf("OBS %s below mark asleep: n=%d bits=%#x full_timeout=%d\n", name, n,
         bits, waited >= 200);
  CHECK_EQ(n, 0);
  CHECK(waited >= 200);
  n = wait_readable(kind, s, ep, 0, &bits);
  printf("OBS %s below mark now: n=%d bits=%#x queued=%d\n", name, n, bits, queued(s));
  CHECK_EQ(n, 0);

  /* 4 more reach the mark while it sleeps. */
  struct later l2 = {c, {30}, {"ghij"}, 0, -1, 0, 0};
  later_start(&l2);
  n = wait_readable(kind, s, ep, 5000, &bits);
  later_join(&l2);
  printf("OBS %s at mark: n=%d bits=%#x\n", name, n, bits);
  CHECK_EQ(n, 1);
  CHECK(bits & POLLIN);
  char buf[64];
  CHECK_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 10);
  CHECK(memcmp(buf, "abcdefghij", 10) == 0);

  /* The mark lowered while the call sleeps with 3 bytes queued: readable
   * (as tcp_set_rcvlowat wakes the socket). */
  CHECK_EQ(send(c, "klm", 3, 0), 3);
  struct later l3 = {c, {50}, {NULL}, 0, s, 2, 0};
  later_start(&l3);
  t0 = now_ms();
  n = wait_readable(kind, s, ep, 5000, &bits);
  waited = now_ms() - t0;
  later_join(&l3);
  printf("OBS %s mark lowered: n=%d bits=%#x before_timeout=%d\n", name, n, bits,
         waited < 4000);
  CHECK_EQ(n, 1);
  CHECK_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 3);
  set_lowat(s, 10);

  /* End of stream with 2 bytes: readable, then the 2, then 0. */
  struct later l4 = {c, {30}, {"no"}, 1, -1, 0, 0};
  later_start(&l4);
  n = wait_readable(kind, s, ep, 5000, &bits);
  later_join(&l4);
  printf("OBS %s eof below mark: n=%d bits=%#x\n", name, n, bits & (POLLIN | POLLOUT));
  CHECK_EQ(n, 1);
  CHECK(bits & POLLIN);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 2);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 0);
  if (ep >= 0) close(ep);
  close(c);
  close(s);
}

/* epoll, edge-triggered: an edge per arrival once the mark's bytes are
 * queued, none below it. */
static void epoll_edges(void) {
  int c, s;
  make_pair(&c, &s);
  set_lowat(s, 10);
  int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct epoll_event ev = {EPOLLIN | EPOLLET, {.u64 = 42}}, out[2];
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
  /* (bytes sent, bytes read, expected events) */
  static const struct { const char* send; int read; int want; } steps[] = {
      {"abc", 0, 0},       /* 3 */
      {"defghijk", 0, 1},  /* 11 */
      {"", 0, 0},          /* no new edge */
      {"l", 0, 1},         /* 12 */
      {"", 5, 0},          /* 7 left */
      {"m", 0, 0},         /* 8 */
      {"no", 0, 1},        /* 10 */
  };
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); ++i) {
    size_t len = strlen(steps[i].send);
    if (len) CHECK_EQ(send(c, steps[i].send, len, 0), (long long)len);
    if (steps[i].read) {
      char buf[16];
      CHECK_EQ(recv(s, buf, (size_t)steps[i].read, 0), steps[i].read);
    }
    sleep_ms(20);
    int n = epoll_wait(ep, out, 2, 0);
    printf("OBS epoll ET step %zu: n=%d\n", i, n);
    CHECK_EQ(n, steps[i].want);
  }
  /* Empty the queue; then 3 bytes (no edge) and 7 more (the edge) while
   * the wait sleeps. */
  char buf[64];
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 10);
  struct later l = {c, {30, 30}, {"pqr", "stuvwxy"}, 0, -1, 0, 0};
  later_start(&l);
  int n = epoll_wait(ep, out, 2, 5000);
  later_join(&l);
  printf("OBS epoll ET asleep: n=%d events=%#x\n", n, n > 0 ? out[0].events : 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 10);
  close(ep);
  close(c);
  close(s);
}

/* recv and its flags against the mark (10). */
static void receives(void) {
  int c, s;
  make_pair(&c, &s);
  set_lowat(s, 10);
  char buf[128];

  /* Non-blocking: what is there. */
  CHECK_EQ(send(c, "abc", 3, 0), 3);
  sleep_ms(20);
  ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
  printf("OBS nonblocking recv below mark: %zd\n", n);
  CHECK_EQ(n, 3);
  CHECK_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);

  /* Blocking, with SO_RCVTIMEO: what came, at the timeout. */
  set_rcvtimeo_ms(s, 150);
  CHECK_EQ(send(c, "d", 1, 0), 1);
  int64_t t0 = now_ms();
  n = recv(s, buf, sizeof(buf), 0);
  int64_t waited = now_ms() - t0;
  printf("OBS blocking recv 1 queued, timeout: %zd waited_timeout=%d\n", n, waited >= 100);
  CHECK_EQ(n, 1);
  CHECK(waited >= 100);
  t0 = now_ms();
  errno = 0;
  n = recv(s, buf, sizeof(buf), 0);
  int e = errno;
  printf("OBS blocking recv none, timeout: %zd errno=%d\n", n, e);
  CHECK(n == -1 && e == EAGAIN);

  /* A length below the mark: min(mark, length). */
  CHECK_EQ(send(c, "efg", 3, 0), 3);
  sleep_ms(20);
  n = recv(s, buf, 2, 0);
  printf("OBS blocking recv len 2 of 3: %zd\n", n);
  CHECK_EQ(n, 2);
  n = recv(s, buf, 2, MSG_PEEK);
  printf("OBS blocking peek len 2 of 1: %zd\n", n);
  CHECK_EQ(n, 1);
  CHECK_EQ(recv(s, buf, 1, 0), 1);

  /* Blocking, no timeout: waits across arrivals until the mark. */
  set_rcvtimeo_ms(s, 0);
  struct later l = {c, {10, 60, 60}, {"hij", "klmnopq", "rst"}, 0, -1, 0, 0};
  later_start(&l);
  n = recv(s, buf, sizeof(buf), 0);
  printf("OBS blocking recv across arrivals: at_least_mark=%d\n", n >= 10);
  CHECK(n >= 10);
  CHECK(memcmp(buf, "hijklmnopq", 10) == 0);
  later_join(&l);
  ssize_t rest = recv(s, buf + n, sizeof(buf) - (size_t)n, MSG_DONTWAIT);
  CHECK_EQ(n + (rest > 0 ? rest : 0), 13);

  /* MSG_PEEK waits until the mark is queued, then shows what is. */
  set_rcvtimeo_ms(s, 150);
  CHECK_EQ(send(c, "uvwx", 4, 0), 4);
  t0 = now_ms();
  n = recv(s, buf, sizeof(buf), MSG_PEEK);
  waited = now_ms() - t0;
  printf("OBS blocking peek 4 queued, timeout: %zd waited_timeout=%d\n", n, waited >= 100);
  CHECK_EQ(n, 4);
  CHECK(waited >= 100);
  set_rcvtimeo_ms(s, 0);
  struct later l2 = {c, {40}, {"yz0123"}, 0, -1, 0, 0};
  later_start(&l2);
  n = recv(s, buf, sizeof(buf), MSG_PEEK);
  later_join(&l2);
  printf("OBS blocking peek reaches mark: %zd\n", n);
  CHECK_EQ(n, 10);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 10);
  CHECK(memcmp(buf, "uvwxyz0123", 10) == 0);

  /* Once the call holds bytes, only the mark's bytes queued anew wake it
   * (tcp_data_ready): 3 taken at once, 7 more do not reach the mark, so
   * the call sleeps to its timeout and then takes them. */
  set_rcvtimeo_ms(s, 200);
  CHECK_EQ(send(c, "ABC", 3, 0), 3);
  sleep_ms(20);
  struct later l5 = {c, {30}, {"DEFGHIJ"}, 0, -1, 0, 0};
  later_start(&l5);
  t0 = now_ms();
  n = recv(s, buf, sizeof(buf), 0);
  waited = now_ms() - t0;
  later_join(&l5);
  printf("OBS blocking recv 3 then 7: %zd waited_timeout=%d\n", n, waited >= 150);
  CHECK_EQ(n, 10);
  CHECK(waited >= 150);

  /* MSG_WAITALL: all of the length, with the same wake-ups (10 wake it,
   * the last 6 come in at the timeout). */
  struct later l3 = {c, {20, 20}, {"0123456789", "abcdef"}, 0, -1, 0, 0};
  later_start(&l3);
  t0 = now_ms();
  n = recv(s, buf, 16, MSG_WAITALL);
  waited = now_ms() - t0;
  later_join(&l3);
  printf("OBS waitall 16, 10 then 6: %zd waited_timeout=%d\n", n, waited >= 150);
  CHECK_EQ(n, 16);
  CHECK(waited >= 150);
  set_rcvtimeo_ms(s, 0);

  /* End of stream below the mark: a blocking recv returns what there is. */
  struct later l4 = {c, {30}, {"xy"}, 1, -1, 0, 0};
  later_start(&l4);
  n = recv(s, buf, sizeof(buf), 0);
  later_join(&l4);
  printf("OBS blocking recv eof below mark: %zd\n", n);
  CHECK_EQ(n, 2);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 0);
  close(c);
  close(s);
}

/* getsockopt/setsockopt: defaults, clamping, inheritance. */
static void option_values(void) {
  int l = listen_on("127.0.0.1");
  int fresh = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fresh >= 0);
  printf("OBS default: listener=%d fresh=%d\n", get_lowat(l), get_lowat(fresh));
  CHECK_EQ(get_lowat(fresh), 1);
  set_lowat(fresh, 0);
  printf("OBS set 0: %d\n", get_lowat(fresh));
  CHECK_EQ(get_lowat(fresh), 1);
  set_lowat(fresh, 7);
  printf("OBS set 7 before connect: %d\n", get_lowat(fresh));
  set_lowat(l, 100);
  struct sockaddr_storage addr;
  socklen_t len = make_addr("127.0.0.1", port_of(l), &addr);
  CHECK(connect(fresh, (struct sockaddr*)&addr, len) == 0);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  printf("OBS after connect: client=%d accepted=%d\n", get_lowat(fresh), get_lowat(s));
  CHECK_EQ(get_lowat(fresh), 7);
  CHECK_EQ(get_lowat(s), 100);

  /* The client's mark, set before connect, holds: 5 bytes, then 2 more. */
  unsigned bits;
  CHECK_EQ(send(s, "abcde", 5, 0), 5);
  sleep_ms(20);
  int n = wait_readable(W_POLL, fresh, -1, 50, &bits);
  printf("OBS client mark 7, 5 queued: %d\n", n);
  CHECK_EQ(n, 0);
  CHECK_EQ(send(s, "fg", 2, 0), 2);
  n = wait_readable(W_POLL, fresh, -1, 5000, &bits);
  printf("OBS client mark 7, 7 queued: %d\n", n);
  CHECK_EQ(n, 1);

  /* The accepted socket's, inherited: 99 bytes, then 1 more. */
  char buf[128];
  memset(buf, 'x', sizeof(buf));
  CHECK_EQ(send(fresh, buf, 99, 0), 99);
  sleep_ms(20);
  n = wait_readable(W_POLL, s, -1, 50, &bits);
  printf("OBS accepted mark 100, 99 queued: %d\n", n);
  CHECK_EQ(n, 0);
  CHECK_EQ(send(fresh, buf, 1, 0), 1);
  n = wait_readable(W_POLL, s, -1, 5000, &bits);
  printf("OBS accepted mark 100, 100 queued: %d\n", n);
  CHECK_EQ(n, 1);
  close(fresh);
  close(s);
  close(l);
}

/* A mark well above the kernel's initial receive buffer (128 KiB): the
 * kernel grows the buffer to hold it; poll reports the socket once that
 * many bytes are queued, not before, while a writer streams into it. */
struct stream_arg {
  int fd;
  size_t total;
};

static void* stream_main(void* arg) {
  struct stream_arg* a = arg;
  static unsigned char chunk[16384];
  fill_pattern(chunk, sizeof(chunk), 0);
  for (size_t sent = 0; sent < a->total;) {
    size_t len = a->total - sent < sizeof(chunk) ? a->total - sent : sizeof(chunk);
    write_all(a->fd, chunk, len);
    sent += len;
    sleep_ms(1);
  }
  return NULL;
}

static void large_mark(void) {
  enum { kMark = 300000, kTotal = 400000 };
  int c, s;
  make_pair(&c, &s);
  set_lowat(s, kMark);
  printf("OBS large mark: %d\n", get_lowat(s));
  CHECK_EQ(get_lowat(s), kMark);
  struct stream_arg a = {c, kTotal};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, stream_main, &a) == 0);
  unsigned bits;
  int n = wait_readable(W_POLL, s, -1, 10000, &bits);
  int at_report = queued(s);
  printf("OBS large mark reported: n=%d queued_at_least_mark=%d\n", n, at_report >= kMark);
  CHECK_EQ(n, 1);
  CHECK(at_report >= kMark);
  CHECK(pthread_join(t, NULL) == 0);
  static unsigned char buf[kTotal];
  read_exact(s, buf, kTotal);
  close(c);
  close(s);
}

int main(void) {
  ptest_start(60);
  signal(SIGPIPE, SIG_IGN);
  option_values();
  for (int kind = 0; kind < W_COUNT; ++kind) wait_below_mark(kind);
  epoll_edges();
  receives();
  large_mark();
  printf("PASS\n");
  return 0;
}
