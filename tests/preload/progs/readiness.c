/* Readiness is never reported without something to read.
 * 1. A stale wake-up, injected into a shared-memory connection's wait socket
 *    (found with a raw getsockname system call, which the interposer does
 *    not see), must not make poll()/select() report the socket readable.
 * 2. A writer process
 * sends bursts of small messages; the reader waits with select() or poll()
 * and then reads with MSG_DONTWAIT: EAGAIN there means select/poll reported
 * a descriptor readable with nothing to read, which would block a program
 * that reads a blocking socket after select() (iperf3 and socat do).  Then a
 * strict ping-pong of blocking reads after select()/poll(). */
#include "ptest.h"

#include <sched.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#define BURSTS 20000
#define ROUNDS 5000

static int readable_select(int fd) {
  for (;;) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    struct timeval tv = {10, 0};
    int n = select(fd + 1, &r, NULL, NULL, &tv);
    if (n < 0 && errno == EINTR) continue;
    CHECK(n >= 0);
    return n == 1 && FD_ISSET(fd, &r);
  }
}

static int readable_poll(int fd) { return (wait_for(fd, POLLIN, 10000) & POLLIN) != 0; }

/* Sends one datagram to fd's wait socket if fd is a shared-memory
 * connection (its kernel object is then an AF_UNIX datagram socket).
 * Returns 0 when fd is a TCP socket. */
static int inject_wakeup(int fd) {
  struct sockaddr_un addr;
  socklen_t len = sizeof(addr);
  CHECK(syscall(SYS_getsockname, fd, (struct sockaddr*)&addr, &len) == 0);
  if (addr.sun_family != AF_UNIX) return 0;
  int u = socket(AF_UNIX, SOCK_DGRAM, 0);
  CHECK(u >= 0);
  CHECK_EQ(sendto(u, "", 1, 0, (struct sockaddr*)&addr, len), 1);
  close(u);
  return 1;
}

static void stale_wakeups(void) {
  int c, s;
  make_pair(&c, &s);
  if (!inject_wakeup(c)) {
    printf("stale_wakeups=skipped (kernel TCP)\n");
    close(c);
    close(s);
    return;
  }
  struct pollfd pfd = {c, POLLIN, 0};
  int64_t start = now_ms();
  CHECK_EQ(poll(&pfd, 1, 200), 0);
  CHECK(now_ms() - start >= 150);
  CHECK(inject_wakeup(c));
  fd_set r;
  FD_ZERO(&r);
  FD_SET(c, &r);
  struct timeval tv = {0, 200000};
  CHECK_EQ(select(c + 1, &r, NULL, NULL, &tv), 0);
  CHECK(inject_wakeup(c));
  struct timespec ts = {0, 100000000};
  CHECK_EQ(ppoll(&pfd, 1, &ts, NULL), 0);
  /* A stale wake-up next to real data: only the data is reported. */
  CHECK(inject_wakeup(c));
  CHECK_EQ(write(s, "x", 1), 1);
  CHECK(wait_for(c, POLLIN, 2000) & POLLIN);
  char b;
  CHECK_EQ(recv(c, &b, 1, MSG_DONTWAIT), 1);
  CHECK_EQ(wait_for(c, POLLIN, 100), 0);
  printf("stale_wakeups=filtered\n");
  close(c);
  close(s);
}

int main(void) {
  ptest_start(50);
  stale_wakeups();
  int c, s;
  make_pair(&c, &s);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(c);
    /* bursts of 1..3 one-byte writes, sometimes yielding in between */
    unsigned char b = 0;
    for (int i = 0; i < BURSTS; ++i) {
      for (int k = 0; k <= i % 3; ++k) CHECK_EQ(write(s, &b, 1), 1);
      if (i % 7 == 0) sched_yield();
    }
    b = 1;
    CHECK_EQ(write(s, &b, 1), 1);  /* end marker */
    /* ping-pong: echo ROUNDS bytes, waiting with poll() */
    for (int i = 0; i < ROUNDS; ++i) {
      CHECK(readable_poll(s));
      CHECK_EQ(read(s, &b, 1), 1);
      CHECK_EQ(write(s, &b, 1), 1);
    }
    _exit(0);
  }
  close(s);
  int spurious = 0, reports = 0, done = 0;
  long bytes = 0;
  unsigned char buf[4096];
  while (!done) {
    int ready = reports % 2 ? readable_select(c) : readable_poll(c);
    CHECK(ready);
    ++reports;
    ssize_t n = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      CHECK_EQ(errno, EAGAIN);
      ++spurious;
      continue;
    }
    CHECK(n > 0);
    bytes += n;
    for (ssize_t k = 0; k < n; ++k) done |= buf[k] == 1;
  }
  printf("reports=%d spurious=%d bytes=%ld\n", reports, spurious, bytes);
  CHECK_EQ(spurious, 0);
  unsigned char b;
  for (int i = 0; i < ROUNDS; ++i) {
    b = (unsigned char)(i | 2);
    CHECK_EQ(write(c, &b, 1), 1);
    CHECK(i % 2 ? readable_select(c) : readable_poll(c));
    CHECK_EQ(read(c, &b, 1), 1);
    CHECK_EQ(b, (unsigned char)(i | 2));
  }
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(c);
  printf("PASS\n");
  return 0;
}
