/* Non-blocking I/O: O_NONBLOCK through fcntl, FIONBIO and SOCK_NONBLOCK;
 * EAGAIN on an empty socket and on a full one; poll() readiness that follows
 * the data; accept4(SOCK_NONBLOCK). */
#include "ptest.h"

#include <sys/ioctl.h>

#define CHUNK 65536

static void* delayed_writer(void* arg) {
  int fd = *(int*)arg;
  sleep_ms(150);
  CHECK_EQ(write(fd, "late", 4), 4);
  return NULL;
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  char buf[CHUNK];

  /* fcntl(O_NONBLOCK) on the server end */
  set_nonblocking(s, 1);
  CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
  CHECK_ERR(read(s, buf, sizeof(buf)), EAGAIN);
  CHECK_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
  CHECK_EQ(wait_for(s, POLLIN, 0), 0);

  /* FIONBIO on the client end, then fill it until EAGAIN */
  int on = 1;
  CHECK(ioctl(c, FIONBIO, &on) == 0);
  CHECK(fcntl(c, F_GETFL) & O_NONBLOCK);
  CHECK(wait_for(c, POLLOUT, 0) & POLLOUT);
  unsigned char out[CHUNK];
  uint64_t written = 0;
  for (;;) {
    fill_pattern(out, CHUNK, written);
    ssize_t n = write(c, out, CHUNK);
    if (n < 0) {
      CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
      break;
    }
    CHECK(n > 0);
    written += (uint64_t)n;
    CHECK(written < (256u << 20));  /* a full socket must say EAGAIN */
  }
  printf("filled=%llu\n", (unsigned long long)written);
  CHECK(written > 0);
  CHECK_ERR(send(c, out, 1, 0), EAGAIN);
  /* Full: no POLLOUT until the reader makes room. */
  CHECK_EQ(wait_for(c, POLLOUT, 0) & POLLOUT, 0);

  /* The reader drains everything without blocking, in order. */
  CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
  uint64_t got = 0;
  for (;;) {
    ssize_t n = read(s, buf, sizeof(buf));
    if (n < 0) {
      CHECK_EQ(errno, EAGAIN);
      if (got == written) break;
      CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
      continue;
    }
    CHECK(n > 0);
    CHECK(check_pattern((unsigned char*)buf, (size_t)n, got));
    got += (uint64_t)n;
  }
  CHECK_EQ(got, written);
  CHECK(wait_for(c, POLLOUT, 2000) & POLLOUT);
  CHECK_EQ(write(c, "x", 1), 1);
  CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(s, buf, sizeof(buf)), 1);

  /* Back to blocking: a read waits for the data. */
  set_nonblocking(s, 0);
  CHECK_EQ(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
  on = 0;
  CHECK(ioctl(c, FIONBIO, &on) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, delayed_writer, &c) == 0);
  int64_t start = now_ms();
  CHECK_EQ(read(s, buf, sizeof(buf)), 4);
  CHECK(now_ms() - start >= 100);
  CHECK(memcmp(buf, "late", 4) == 0);
  CHECK(pthread_join(t, NULL) == 0);

  /* accept4(SOCK_NONBLOCK), and a non-blocking listener */
  int l = listen_on("127.0.0.1");
  set_nonblocking(l, 1);
  CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
  CHECK_ERR(accept4(l, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
  int c2 = connect_to("127.0.0.1", port_of(l));
  CHECK(wait_for(l, POLLIN, 2000) & POLLIN);
  int s2 = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  CHECK(s2 >= 0);
  CHECK(fcntl(s2, F_GETFL) & O_NONBLOCK);
  CHECK(fcntl(s2, F_GETFD) & FD_CLOEXEC);
  CHECK_ERR(read(s2, buf, 1), EAGAIN);
  CHECK_EQ(write(c2, "ok", 2), 2);
  CHECK(wait_for(s2, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(s2, buf, sizeof(buf)), 2);

  /* SOCK_NONBLOCK on socket(): connect to a local listener completes (or
   * is in progress), then the socket stays non-blocking. */
  struct sockaddr_storage addr;
  socklen_t len = make_addr("127.0.0.1", port_of(l), &addr);
  int c3 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(c3 >= 0);
  int rc = connect(c3, (struct sockaddr*)&addr, len);
  CHECK(rc == 0 || errno == EINPROGRESS);
  CHECK(wait_for(c3, POLLOUT, 2000) & POLLOUT);
  CHECK(fcntl(c3, F_GETFL) & O_NONBLOCK);
  CHECK_ERR(read(c3, buf, 1), EAGAIN);
  CHECK(wait_for(l, POLLIN, 2000) & POLLIN);
  int s3 = accept(l, NULL, NULL);
  CHECK(s3 >= 0);
  CHECK_EQ(fcntl(s3, F_GETFL) & O_NONBLOCK, 0);
  CHECK_EQ(write(s3, "hi", 2), 2);
  CHECK(wait_for(c3, POLLIN, 2000) & POLLIN);
  CHECK_EQ(read(c3, buf, sizeof(buf)), 2);

  close(c3); close(s3); close(c2); close(s2); close(l); close(c); close(s);
  printf("PASS\n");
  return 0;
}
