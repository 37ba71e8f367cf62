/* SO_SNDBUF and SO_RCVBUF bound the bytes in flight, as on kernel TCP:
 *  1. set on both ends after connect: a non-blocking writer whose peer
 *     does not read gets EAGAIN after a bounded number of bytes;
 *  2. set before connect (and on the listener, which accepted sockets
 *     inherit): the same bound;
 *  3. raised again later: more bytes fit;
 *  4. getsockopt reports the kernel's (doubled) value;
 *  5. a blocking writer of 8 MiB whose peer reads a little and closes gets
 *     ECONNRESET or EPIPE before it has written everything (kernel TCP's
 *     RST), instead of every write vanishing into a big buffer.
 * The bound checked is loose (the kernel's own accounting varies): at most
 * 512 KiB in flight with 16 KiB asked for at each end, where an unbounded
 * shared-memory ring would take 1 MiB and more. */
#include "ptest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>

enum { kAsk = 16384, kBound = 512 * 1024 };

static void set_buf(int fd, int name, int bytes) {
  CHECK(setsockopt(fd, SOL_SOCKET, name, &bytes, sizeof(bytes)) == 0);
}

static int get_buf(int fd, int name) {
  int v = 0;
  socklen_t len = sizeof(v);
  CHECK(getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0);
  return v;
}

/* Bytes a non-blocking writer gets in before EAGAIN (the peer reads
 * nothing meanwhile). */
static size_t fill_until_eagain(int fd) {
  set_nonblocking(fd, 1);
  static char buf[4096];
  size_t total = 0;
  for (int idle = 0; idle < 3;) {
    ssize_t n = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
    if (n > 0) {
      total += (size_t)n;
      idle = 0;
      CHECK(total < (64u << 20));
      continue;
    }
    CHECK(n < 0 && errno == EAGAIN);
    ++idle;
    sleep_ms(20); /* let kernel TCP move what it can */
  }
  set_nonblocking(fd, 0);
  return total;
}

static void drain(int fd, size_t len) {
  static char buf[65536];
  while (len > 0) {
    ssize_t n = read(fd, buf, len < sizeof(buf) ? len : sizeof(buf));
    CHECK(n > 0);
    len -= (size_t)n;
  }
}

static void after_connect(void) {
  int c, s;
  make_pair(&c, &s);
  set_buf(c, SO_SNDBUF, kAsk);
  set_buf(s, SO_RCVBUF, kAsk);
  CHECK_EQ(get_buf(c, SO_SNDBUF), 2 * kAsk);
  CHECK_EQ(get_buf(s, SO_RCVBUF), 2 * kAsk);
  size_t in_flight = fill_until_eagain(c);
  printf("after connect: %zu bytes in flight\n", in_flight);
  CHECK(in_flight >= 4096 && in_flight <= kBound);
  /* Raised later: more fits. */
  set_buf(c, SO_SNDBUF, 8 * kAsk);
  set_buf(s, SO_RCVBUF, 8 * kAsk);
  size_t more = fill_until_eagain(c);
  printf("raised: %zu more bytes\n", more);
  CHECK(more > 0);
  drain(s, in_flight + more);
  CHECK(close(c) == 0);
  CHECK(close(s) == 0);
}

static void before_connect(void) {
  /* A listener with a small receive buffer; a client with a small send
   * buffer, both set before the connection exists. */
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(lfd >= 0);
  set_buf(lfd, SO_RCVBUF, kAsk);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(lfd, (struct sockaddr*)&a, sizeof(a)) == 0);
  CHECK(listen(lfd, 8) == 0);
  socklen_t alen = sizeof(a);
  CHECK(getsockname(lfd, (struct sockaddr*)&a, &alen) == 0);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(c >= 0);
  set_buf(c, SO_SNDBUF, kAsk);
  CHECK(connect(c, (struct sockaddr*)&a, sizeof(a)) == 0);
  int s = accept(lfd, NULL, NULL);
  CHECK(s >= 0);
  CHECK(close(lfd) == 0);
  CHECK_EQ(get_buf(s, SO_RCVBUF), 2 * kAsk);
  size_t in_flight = fill_until_eagain(c);
  printf("before connect: %zu bytes in flight\n", in_flight);
  CHECK(in_flight >= 4096 && in_flight <= kBound);
  drain(s, in_flight);
  CHECK(close(c) == 0);
  CHECK(close(s) == 0);
}

static void peer_closes_mid_transfer(void) {
  int c, s;
  make_pair(&c, &s);
  set_buf(c, SO_SNDBUF, kAsk);
  set_buf(s, SO_RCVBUF, kAsk);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    CHECK(close(c) == 0);
    drain(s, 1000);
    sleep_ms(100);
    CHECK(close(s) == 0); /* unread data: RST */
    _exit(0);
  }
  CHECK(close(s) == 0);
  static char buf[65536];
  size_t sent = 0;
  int err = 0;
  while (sent < (8u << 20)) {
    ssize_t n = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    sent += (size_t)n;
  }
  printf("peer closed: sent %zu, then errno %d\n", sent, err);
  CHECK(err == ECONNRESET || err == EPIPE);
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(close(c) == 0);
}

int main(void) {
  ptest_start(60);
  after_connect();
  before_connect();
  peer_closes_mid_transfer();
  printf("PASS\n");
  return 0;
}
