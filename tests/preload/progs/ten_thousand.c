/* Ten thousand concurrent connections between two processes.
 *   ten_thousand server PORT N   an epoll server (level-triggered, non-
 *                                blocking): accepts N connections, echoes
 *                                every byte, exits once all N have closed
 *   ten_thousand client PORT N   opens N connections and holds them all,
 *                                sends 64 bytes distinct per connection on
 *                                each, checks every echo while all are
 *                                open, reports the setup rate, descriptors
 *                                and shared memory (/proc/meminfo Shmem,
 *                                both ends) per connection, closes them
 * Each end sets its soft RLIMIT_NOFILE to what the program itself needs
 * (N + 64) and a hard limit far above it where it may, as a stock service
 * has (soft 1024, hard 524288): vsocket's own descriptors live above the
 * soft limit, so connections past what the hard limit leaves room for take
 * TCP (fd_limit).  Prints SKIP when the soft limit cannot be N + 64.
 * Prints PASS. */
#include "ptest.h"

#include <sys/epoll.h>
#include <sys/resource.h>

enum { kMessage = 64 };

/* Soft limit N + 64; the hard limit raised to 8N + 4096 where we may (root
 * with CAP_SYS_RESOURCE), else left as it is.  Returns 0, or -1 when even
 * the soft limit cannot be had.  Prints "hard limit H". */
static int set_limits(int n) {
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  rlim_t want_hard = (rlim_t)n * 8 + 4096;
  struct rlimit raised = {(rlim_t)n + 64, rl.rlim_max};
  if (raised.rlim_max != RLIM_INFINITY && raised.rlim_max < want_hard) {
    raised.rlim_max = want_hard;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) goto done;
    raised.rlim_max = rl.rlim_max;
  }
  if (raised.rlim_max != RLIM_INFINITY && raised.rlim_max < raised.rlim_cur) return -1;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return -1;
done:
  printf("hard limit %lld\n", (long long)raised.rlim_max);
  return 0;
}

static void fill(unsigned char* buf, int index) {
  for (int i = 0; i < kMessage; ++i) buf[i] = (unsigned char)(index * 131 + i * 7 + 1);
}

static int run_server(int port, int n) {
  int l = listen_on_port("127.0.0.1", port, 4096);
  CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
  int accepted = 0, closed = 0;
  static struct epoll_event ready[256];
  while (closed < n) {
    int r = epoll_wait(ep, ready, 256, 30000);
    CHECK(r > 0);
    for (int i = 0; i < r; ++i) {
      int fd = ready[i].data.fd;
      if (fd == l) {
        for (;;) {
          int c = accept4(l, NULL, NULL, SOCK_NONBLOCK);
          if (c < 0 && (errno == EAGAIN || errno == EINTR)) break;
          CHECK(c >= 0);
          ++accepted;
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
          CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) == 0);
        }
        continue;
      }
      char buf[4096];
      ssize_t got = read(fd, buf, sizeof(buf));
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      CHECK(got >= 0);
      if (got == 0) {
        CHECK(close(fd) == 0);  /* also leaves the epoll set */
        ++closed;
        continue;
      }
      for (ssize_t off = 0; off < got;) {
        ssize_t w = write(fd, buf + off, (size_t)(got - off));
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
          struct pollfd p = {fd, POLLOUT, 0};
          poll(&p, 1, 1000);
          continue;
        }
        CHECK(w > 0);
        off += w;
      }
    }
  }
  CHECK_EQ(accepted, n);
  close(ep);
  close(l);
  printf("served %d\nPASS\n", accepted);
  return 0;
}

static int run_client(int port, int n) {
  int* fds = calloc((size_t)n, sizeof(int));
  CHECK(fds != NULL);
  long shmem_before = shmem_kib();
  int fds_before = open_descriptors();
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int64_t start = now_ms();
  for (int i = 0; i < n; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fds[i] >= 0);
    CHECK(connect(fds[i], (struct sockaddr*)&a, sizeof(a)) == 0);
  }
  int64_t connected = now_ms();
  unsigned char want[kMessage], got[kMessage];
  for (int i = 0; i < n; ++i) {
    fill(want, i);
    write_all(fds[i], want, kMessage);
  }
  for (int i = 0; i < n; ++i) {
    fill(want, i);
    read_exact(fds[i], got, kMessage);
    if (memcmp(want, got, kMessage) != 0) {
      fprintf(stderr, "FAIL: connection %d echoed other bytes\n", i);
      return 1;
    }
  }
  printf("connected %d in %lld ms (%.0f/s); every echo checked\n", n,
         (long long)(connected - start),
         n * 1000.0 / (double)(connected - start > 0 ? connected - start : 1));
  long shmem = shmem_kib() - shmem_before;
  printf("per connection: %.2f descriptors here, %.1f KiB shared memory (both ends)\n",
         (double)(open_descriptors() - fds_before) / n, (double)shmem / n);
  printf("shared memory in all: %ld KiB\n", shmem);
  for (int i = 0; i < n; ++i) CHECK(close(fds[i]) == 0);
  free(fds);
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  ptest_start(150);
  CHECK(argc == 4);
  int port = atoi(argv[2]), n = atoi(argv[3]);
  CHECK(n > 0);
  if (set_limits(n) != 0) {
    printf("SKIP: cannot raise RLIMIT_NOFILE (errno %d)\n", errno);
    return 0;
  }
  if (!strcmp(argv[1], "server")) return run_server(port, n);
  if (!strcmp(argv[1], "client")) return run_client(port, n);
  return 2;
}
