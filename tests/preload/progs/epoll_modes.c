/* epoll on sets that mix a vsocket connection with a pipe, an eventfd and an
 * AF_UNIX socketpair.  usage: epoll_modes lt|et|oneshot|exclusive|preconnect */
#include "ptest.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

enum { TAG_SOCK = 1, TAG_PIPE, TAG_EVENT, TAG_UNIX };

struct mix {
  int c, s;      /* the connection: s is watched */
  int pipe_fd[2];
  int efd;
  int unix_fd[2];
};

static void make_mix(struct mix* m) {
  make_pair(&m->c, &m->s);
  CHECK(pipe(m->pipe_fd) == 0);
  m->efd = eventfd(0, EFD_NONBLOCK);
  CHECK(m->efd >= 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, m->unix_fd) == 0);
}

static void add(int ep, int fd, uint32_t events, uint64_t tag) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.u64 = tag;
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
}

/* Collects the tags reported by one epoll_wait (bit per tag). */
static unsigned wait_tags(int ep, int timeout_ms, uint32_t* sock_events) {
  struct epoll_event evs[16];
  int n = epoll_wait(ep, evs, 16, timeout_ms);
  CHECK(n >= 0);
  unsigned tags = 0;
  for (int i = 0; i < n; ++i) {
    tags |= 1u << evs[i].data.u64;
    if (evs[i].data.u64 == TAG_SOCK && sock_events) *sock_events = evs[i].events;
  }
  return tags;
}

#define BIT(t) (1u << (t))

static void test_lt(void) {
  struct mix m;
  make_mix(&m);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  add(ep, m.s, EPOLLIN, TAG_SOCK);
  add(ep, m.pipe_fd[0], EPOLLIN, TAG_PIPE);
  add(ep, m.efd, EPOLLIN, TAG_EVENT);
  add(ep, m.unix_fd[0], EPOLLIN, TAG_UNIX);
  CHECK_EQ(wait_tags(ep, 0, NULL), 0);

  CHECK_EQ(write(m.c, "0123456789", 10), 10);
  uint32_t sev = 0;
  CHECK_EQ(wait_tags(ep, 2000, &sev), BIT(TAG_SOCK));
  CHECK(sev & EPOLLIN);
  /* Level-triggered: reported again until read. */
  CHECK_EQ(wait_tags(ep, 100, NULL), BIT(TAG_SOCK));
  char buf[64];
  CHECK_EQ(read(m.s, buf, 4), 4);
  CHECK_EQ(wait_tags(ep, 100, NULL), BIT(TAG_SOCK));
  CHECK_EQ(read(m.s, buf, sizeof(buf)), 6);
  CHECK_EQ(wait_tags(ep, 50, NULL), 0);

  /* The other members report independently. */
  CHECK_EQ(write(m.pipe_fd[1], "p", 1), 1);
  uint64_t one = 1;
  CHECK_EQ(write(m.efd, &one, 8), 8);
  CHECK_EQ(write(m.unix_fd[1], "u", 1), 1);
  CHECK_EQ(write(m.c, "s", 1), 1);
  unsigned all = BIT(TAG_SOCK) | BIT(TAG_PIPE) | BIT(TAG_EVENT) | BIT(TAG_UNIX);
  unsigned seen = 0;
  for (int i = 0; i < 20 && seen != all; ++i) seen |= wait_tags(ep, 200, NULL);
  CHECK_EQ(seen, all);
  CHECK_EQ(read(m.pipe_fd[0], buf, 1), 1);
  CHECK_EQ(read(m.efd, &one, 8), 8);
  CHECK_EQ(read(m.unix_fd[0], buf, 1), 1);
  CHECK_EQ(read(m.s, buf, 1), 1);
  CHECK_EQ(wait_tags(ep, 50, NULL), 0);

  /* EOF is readable too. */
  CHECK(shutdown(m.c, SHUT_WR) == 0);
  CHECK_EQ(wait_tags(ep, 2000, &sev), BIT(TAG_SOCK));
  CHECK_EQ(read(m.s, buf, sizeof(buf)), 0);
  /* EPOLLOUT on the writer's side. */
  int ep2 = epoll_create1(0);
  add(ep2, m.s, EPOLLOUT, TAG_SOCK);
  CHECK_EQ(wait_tags(ep2, 2000, &sev), BIT(TAG_SOCK));
  CHECK(sev & EPOLLOUT);
  close(ep2);
  close(ep);
}

static void test_et(void) {
  struct mix m;
  make_mix(&m);
  int ep = epoll_create1(0);
  add(ep, m.s, EPOLLIN | EPOLLET, TAG_SOCK);
  add(ep, m.pipe_fd[0], EPOLLIN | EPOLLET, TAG_PIPE);
  add(ep, m.efd, EPOLLIN | EPOLLET, TAG_EVENT);
  add(ep, m.unix_fd[0], EPOLLIN | EPOLLET, TAG_UNIX);
  char buf[256];
  for (int round = 0; round < 5; ++round) {
    CHECK_EQ(write(m.c, "abcdef", 6), 6);
    CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_SOCK));
    /* Edge-triggered: no second report without new data. */
    CHECK_EQ(wait_tags(ep, 50, NULL), 0);
    /* Read until EAGAIN, as an edge-triggered reader must. */
    set_nonblocking(m.s, 1);
    CHECK_EQ(read(m.s, buf, sizeof(buf)), 6);
    CHECK_ERR(read(m.s, buf, sizeof(buf)), EAGAIN);
    set_nonblocking(m.s, 0);
  }
  /* Mixed: each member reports its own edge once. */
  CHECK_EQ(write(m.pipe_fd[1], "p", 1), 1);
  uint64_t one = 1;
  CHECK_EQ(write(m.efd, &one, 8), 8);
  CHECK_EQ(write(m.unix_fd[1], "u", 1), 1);
  CHECK_EQ(write(m.c, "s", 1), 1);
  unsigned all = BIT(TAG_SOCK) | BIT(TAG_PIPE) | BIT(TAG_EVENT) | BIT(TAG_UNIX);
  unsigned seen = 0;
  for (int i = 0; i < 20 && seen != all; ++i) seen |= wait_tags(ep, 200, NULL);
  CHECK_EQ(seen, all);
  CHECK_EQ(wait_tags(ep, 50, NULL), 0);
  /* EPOLLOUT|EPOLLET on the client: one report for a writable socket. */
  int ep2 = epoll_create1(0);
  add(ep2, m.c, EPOLLOUT | EPOLLET, TAG_SOCK);
  CHECK_EQ(wait_tags(ep2, 2000, NULL), BIT(TAG_SOCK));
  CHECK_EQ(wait_tags(ep2, 50, NULL), 0);
  close(ep2);
  close(ep);
}

static void test_oneshot(void) {
  struct mix m;
  make_mix(&m);
  int ep = epoll_create1(0);
  add(ep, m.s, EPOLLIN | EPOLLONESHOT, TAG_SOCK);
  add(ep, m.unix_fd[0], EPOLLIN | EPOLLONESHOT, TAG_UNIX);
  add(ep, m.pipe_fd[0], EPOLLIN, TAG_PIPE);
  CHECK_EQ(write(m.c, "1", 1), 1);
  CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_SOCK));
  /* Disarmed: more data, still nothing. */
  CHECK_EQ(write(m.c, "2", 1), 1);
  CHECK_EQ(wait_tags(ep, 100, NULL), 0);
  /* The pipe (level-triggered) is unaffected. */
  CHECK_EQ(write(m.pipe_fd[1], "p", 1), 1);
  CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_PIPE));
  char buf[8];
  CHECK_EQ(read(m.pipe_fd[0], buf, 1), 1);
  /* Re-armed with MOD: the pending data is reported again, once. */
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = TAG_SOCK;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, m.s, &ev) == 0);
  CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_SOCK));
  CHECK_EQ(wait_tags(ep, 100, NULL), 0);
  CHECK_EQ(read(m.s, buf, sizeof(buf)), 2);
  /* The socketpair member behaves the same way. */
  CHECK_EQ(write(m.unix_fd[1], "u", 1), 1);
  CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_UNIX));
  CHECK_EQ(write(m.unix_fd[1], "u", 1), 1);
  CHECK_EQ(wait_tags(ep, 100, NULL), 0);
  close(ep);
}

/* EPOLLEXCLUSIVE: two epoll sets, one waiting thread each, both watching
 * the same connection (and a shared pipe). */
struct waiter {
  int ep;
  int woke;
};

static void* exclusive_waiter(void* arg) {
  struct waiter* w = arg;
  struct epoll_event ev;
  int n = epoll_wait(w->ep, &ev, 1, 3000);
  CHECK(n >= 0);
  w->woke = n;
  return NULL;
}

static void test_exclusive(void) {
  struct mix m;
  make_mix(&m);
  for (int member = 0; member < 2; ++member) {
    int fd = member == 0 ? m.s : m.pipe_fd[0];
    struct waiter w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) {
      w[i].ep = epoll_create1(0);
      w[i].woke = 0;
      add(w[i].ep, fd, EPOLLIN | EPOLLEXCLUSIVE, TAG_SOCK);
      add(w[i].ep, m.unix_fd[0], EPOLLIN, TAG_UNIX);
      CHECK(pthread_create(&t[i], NULL, exclusive_waiter, &w[i]) == 0);
    }
    sleep_ms(100);
    if (member == 0) {
      CHECK_EQ(write(m.c, "x", 1), 1);
    } else {
      CHECK_EQ(write(m.pipe_fd[1], "x", 1), 1);
    }
    sleep_ms(100);
    char buf[8];
    CHECK_EQ(read(fd, buf, sizeof(buf)), 1);
    /* Release whichever thread still waits, through the shared member. */
    CHECK_EQ(write(m.unix_fd[1], "u", 1), 1);
    for (int i = 0; i < 2; ++i) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK_EQ(read(m.unix_fd[0], buf, sizeof(buf)), 1);
    printf("exclusive_member=%d woke=%d,%d\n", member, w[0].woke, w[1].woke);
    CHECK(w[0].woke + w[1].woke >= 1);
    for (int i = 0; i < 2; ++i) close(w[i].ep);
  }
  /* EPOLLEXCLUSIVE cannot be modified, as with any descriptor. */
  int ep = epoll_create1(0);
  add(ep, m.s, EPOLLIN | EPOLLEXCLUSIVE, TAG_SOCK);
  struct epoll_event ev = {EPOLLIN, {0}};
  CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, m.s, &ev), EINVAL);
  close(ep);
}

/* The socket joins the epoll set before connect() (as Netty does): events
 * must still come from the connection afterwards. */
static void test_preconnect(void) {
  int l = listen_on("127.0.0.1");
  struct sockaddr_storage addr;
  socklen_t len = make_addr("127.0.0.1", port_of(l), &addr);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(c >= 0);
  int ep = epoll_create1(0);
  add(ep, c, EPOLLIN | EPOLLOUT | EPOLLET, TAG_SOCK);
  int p[2];
  CHECK(pipe(p) == 0);
  add(ep, p[0], EPOLLIN, TAG_PIPE);
  int rc = connect(c, (struct sockaddr*)&addr, len);
  CHECK(rc == 0 || errno == EINPROGRESS);
  uint32_t sev = 0;
  CHECK(wait_tags(ep, 2000, &sev) & BIT(TAG_SOCK));
  CHECK(sev & EPOLLOUT);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  CHECK_EQ(write(s, "data", 4), 4);
  sev = 0;
  unsigned tags = 0;
  for (int i = 0; i < 10 && !(sev & EPOLLIN); ++i) tags |= wait_tags(ep, 200, &sev);
  CHECK(tags & BIT(TAG_SOCK));
  CHECK(sev & EPOLLIN);
  char buf[8];
  CHECK_EQ(read(c, buf, sizeof(buf)), 4);
  /* Modify and delete work on the new registration. */
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.u64 = TAG_SOCK;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev) == 0);
  CHECK_EQ(wait_tags(ep, 50, NULL), 0);
  CHECK_EQ(write(s, "more", 4), 4);
  CHECK_EQ(wait_tags(ep, 2000, NULL), BIT(TAG_SOCK));
  CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL) == 0);
  CHECK_EQ(wait_tags(ep, 50, NULL), 0);
  close(c);
  close(s);
  close(l);
  close(ep);
}

int main(int argc, char** argv) {
  ptest_start(30);
  CHECK(argc == 2);
  if (!strcmp(argv[1], "lt")) test_lt();
  else if (!strcmp(argv[1], "et")) test_et();
  else if (!strcmp(argv[1], "oneshot")) test_oneshot();
  else if (!strcmp(argv[1], "exclusive")) test_exclusive();
  else if (!strcmp(argv[1], "preconnect")) test_preconnect();
  else CHECK(!"unknown mode");
  printf("PASS\n");
  return 0;
}
