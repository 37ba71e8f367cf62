/* MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL and MSG_NOSIGNAL on a connection. */
#include "ptest.h"

#include <sys/ioctl.h>

static volatile sig_atomic_t g_sigpipes;
static void on_sigpipe(int sig) {
  (void)sig;
  g_sigpipes++;
}

static int g_fd;
static void* chunked_writer(void* arg) {
  (void)arg;
  for (int i = 0; i < 3; ++i) {
    sleep_ms(50);
    char chunk[1000];
    memset(chunk, 'a' + i, sizeof(chunk));
    CHECK_EQ(write(g_fd, chunk, sizeof(chunk)), 1000);
  }
  return NULL;
}

int main(void) {
  ptest_start(30);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigpipe;
  CHECK(sigaction(SIGPIPE, &sa, NULL) == 0);
  int c, s;
  make_pair(&c, &s);
  char buf[4096];

  /* MSG_PEEK leaves the data in place. */
  CHECK_EQ(write(c, "hello world", 11), 11);
  CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
  CHECK_EQ(recv(s, buf, 5, MSG_PEEK), 5);
  CHECK(memcmp(buf, "hello", 5) == 0);
  CHECK_EQ(recv(s, buf, sizeof(buf), MSG_PEEK), 11);
  int avail = 0;
  CHECK(ioctl(s, FIONREAD, &avail) == 0);
  CHECK_EQ(avail, 11);
  CHECK(wait_for(s, POLLIN, 0) & POLLIN);
  CHECK_EQ(recv(s, buf, sizeof(buf), 0), 11);
  CHECK(memcmp(buf, "hello world", 11) == 0);
  CHECK(ioctl(s, FIONREAD, &avail) == 0);
  CHECK_EQ(avail, 0);

  /* MSG_DONTWAIT on a blocking socket. */
  CHECK_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
  CHECK_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT | MSG_PEEK), EAGAIN);
  CHECK_EQ(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
  uint64_t filled = 0;
  for (;;) {
    ssize_t n = send(c, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) break;
    filled += (uint64_t)n;
  }
  CHECK_EQ(errno, EAGAIN);
  CHECK(filled > 0);
  uint64_t drained = 0;
  while (drained < filled) {
    ssize_t n = recv(s, buf, sizeof(buf), 0);
    CHECK(n > 0);
    drained += (uint64_t)n;
  }

  /* MSG_WAITALL waits for the whole length across several writes. */
  pthread_t t;
  g_fd = c;
  CHECK(pthread_create(&t, NULL, chunked_writer, NULL) == 0);
  int64_t start = now_ms();
  CHECK_EQ(recv(s, buf, 3000, MSG_WAITALL), 3000);
  CHECK(now_ms() - start >= 100);
  CHECK(buf[0] == 'a' && buf[1000] == 'b' && buf[2999] == 'c');
  CHECK(pthread_join(t, NULL) == 0);
  /* ... and returns short at end of stream. */
  CHECK_EQ(write(c, buf, 100), 100);
  CHECK(shutdown(c, SHUT_WR) == 0);
  CHECK_EQ(recv(s, buf, 1000, MSG_WAITALL), 100);
  CHECK_EQ(recv(s, buf, 1000, MSG_WAITALL), 0);

  /* MSG_NOSIGNAL: writing to a connection the peer closed fails with EPIPE
   * (or ECONNRESET) and raises no SIGPIPE; without it SIGPIPE is raised. */
  CHECK(close(s) == 0);
  sleep_ms(50);
  ssize_t r = 0;
  for (int i = 0; i < 100 && r >= 0; ++i) {
    /* The reset arrives asynchronously on kernel TCP. */
    r = send(c, "x", 1, MSG_NOSIGNAL);
    if (r >= 0) sleep_ms(10);
  }
  CHECK_EQ(r, -1);
  CHECK(errno == EPIPE || errno == ECONNRESET);
  CHECK_EQ(g_sigpipes, 0);
  /* c was shut down for writing above: every send now fails with EPIPE. */
  CHECK_ERR(send(c, "x", 1, 0), EPIPE);
  CHECK_EQ(g_sigpipes, 1);
  CHECK_ERR(write(c, "x", 1), EPIPE);
  CHECK_EQ(g_sigpipes, 2);
  CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
  CHECK_EQ(g_sigpipes, 2);
  close(c);

  /* A fresh pair: the peer closes, we never shut down ourselves. */
  make_pair(&c, &s);
  CHECK(close(s) == 0);
  sleep_ms(50);
  r = 0;
  for (int i = 0; i < 100 && r >= 0; ++i) {
    r = send(c, "y", 1, MSG_NOSIGNAL);
    if (r >= 0) sleep_ms(10);
  }
  CHECK_EQ(r, -1);
  CHECK(errno == EPIPE || errno == ECONNRESET);
  CHECK_EQ(g_sigpipes, 2);
  CHECK_EQ(send(c, "y", 1, 0), -1);
  CHECK(errno == EPIPE);
  CHECK_EQ(g_sigpipes, 3);
  close(c);
  printf("PASS\n");
  return 0;
}
