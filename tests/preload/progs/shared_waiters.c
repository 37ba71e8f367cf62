/* Two threads blocked on the same socket: two readers each get one whole
 * message; two writers blocked on a full socket both finish once the reader
 * drains it, and every byte arrives exactly once. */
#include "ptest.h"

struct reader {
  int fd;
  ssize_t n;
  char buf[256];
};

static void* blocked_reader(void* arg) {
  struct reader* r = arg;
  r->n = recv(r->fd, r->buf, sizeof(r->buf), 0);
  return NULL;
}

struct writer {
  int fd;
  unsigned char fill;
  size_t len;
  ssize_t n;
};

static void* blocked_writer(void* arg) {
  struct writer* w = arg;
  unsigned char* buf = malloc(w->len);
  CHECK(buf != NULL);
  memset(buf, w->fill, w->len);
  size_t done = 0;
  while (done < w->len) {
    ssize_t n = send(w->fd, buf + done, w->len - done, 0);
    CHECK(n > 0);
    done += (size_t)n;
  }
  w->n = (ssize_t)done;
  free(buf);
  return NULL;
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);

  struct reader r[2] = {{s, 0, {0}}, {s, 0, {0}}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) CHECK(pthread_create(&t[i], NULL, blocked_reader, &r[i]) == 0);
  sleep_ms(200);  /* both are blocked now */
  char msg[100];
  memset(msg, 'A', sizeof(msg));
  CHECK_EQ(write(c, msg, sizeof(msg)), 100);
  sleep_ms(200);
  memset(msg, 'B', sizeof(msg));
  CHECK_EQ(write(c, msg, sizeof(msg)), 100);
  for (int i = 0; i < 2; ++i) CHECK(pthread_join(t[i], NULL) == 0);
  printf("readers=%zd,%zd\n", r[0].n, r[1].n);
  CHECK_EQ(r[0].n + r[1].n, 200);
  CHECK(r[0].n > 0 && r[1].n > 0);
  int as = 0, bs = 0;
  for (int i = 0; i < 2; ++i) {
    for (ssize_t k = 0; k < r[i].n; ++k) {
      if (r[i].buf[k] == 'A') as++;
      if (r[i].buf[k] == 'B') bs++;
    }
  }
  CHECK_EQ(as, 100);
  CHECK_EQ(bs, 100);

  /* Two writers of 3 MiB each into a 1 MiB ring. */
  struct writer w[2] = {{c, 'x', 3u << 20, 0}, {c, 'y', 3u << 20, 0}};
  for (int i = 0; i < 2; ++i) CHECK(pthread_create(&t[i], NULL, blocked_writer, &w[i]) == 0);
  sleep_ms(200);
  size_t counts[2] = {0, 0}, total = 0;
  static char buf[65536];
  while (total < (6u << 20)) {
    ssize_t n = recv(s, buf, sizeof(buf), 0);
    CHECK(n > 0);
    for (ssize_t k = 0; k < n; ++k) {
      CHECK(buf[k] == 'x' || buf[k] == 'y');
      counts[buf[k] == 'y']++;
    }
    total += (size_t)n;
  }
  for (int i = 0; i < 2; ++i) CHECK(pthread_join(t[i], NULL) == 0);
  CHECK_EQ(counts[0], 3u << 20);
  CHECK_EQ(counts[1], 3u << 20);
  CHECK_EQ(w[0].n + w[1].n, 6 << 20);
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
