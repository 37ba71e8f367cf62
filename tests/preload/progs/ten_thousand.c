/* Ten thousand concurrent connections between two processes.
 *   ten_thousand server PORT N   an epoll server (level-triggered, non-
 *                                blocking): accepts N connections, checks
 *                                each one's request byte for byte, answers
 *                                it, closes a connection at its end of
 *                                stream, exits once all N have closed
 *   ten_thousand client PORT N   opens N connections and holds them all,
 *                                sends each its request, checks each reply
 *                                byte for byte while all are open, then
 *                                closes them all
 * Connection i carries a request of 64..4096 bytes (its index, its length,
 * then bytes drawn from both) and a reply of another length, 64..4096
 * bytes, drawn from the index too: no two connections carry the same
 * bytes, so a byte that reaches another connection is caught.
 * Each end raises its soft RLIMIT_NOFILE to what it needs (N + 64) when it
 * is below, as servers do, and leaves the hard limit as it found it
 * (prints SKIP when the hard limit is below N + 64).  The server reports
 * how many connections it held at once; the client the set-up time, the
 * shared memory the host gained (both ends) and both processes' peak
 * resident memory.  The lines up to "exchange:" depend only on N and
 * must be the same on every transport.  Prints PASS. */
#include "ptest.h"

#include <sys/epoll.h>
#include <sys/resource.h>

enum { kHeader = 8, kMinBytes = 64, kMaxBytes = 4096 };

static uint32_t request_length(uint32_t i) {
  return kMinBytes + (i * 2654435761u >> 7) % (kMaxBytes - kMinBytes + 1);
}
static uint32_t reply_length(uint32_t i) {
  return kMinBytes + ((i + 17) * 40503u >> 3) % (kMaxBytes - kMinBytes + 1);
}
/* Byte `at` of connection i's request (direction 0) or reply (1); the
 * request's first 8 bytes are i and its length, little-endian. */
static unsigned char message_byte(uint32_t i, int direction, uint32_t at) {
  if (direction == 0 && at < kHeader) {
    uint32_t field = at < 4 ? i : request_length(i);
    return (unsigned char)(field >> (8 * (at % 4)));
  }
  uint32_t x = (i * 0x9e3779b9u) ^ (at * 0x85ebca6bu) ^ (direction ? 0xc2b2ae35u : 0);
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  return (unsigned char)(x >> 12);
}
static void fill_message(unsigned char* buf, uint32_t i, int direction, uint32_t len) {
  for (uint32_t at = 0; at < len; ++at) buf[at] = message_byte(i, direction, at);
}

/* The soft limit raised to `need` when below it; the hard limit kept.
 * -1 when the hard limit is below `need`. */
static int raise_soft_limit(rlim_t need) {
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  printf("limits at start: soft %lld hard %lld\n", (long long)rl.rlim_cur,
         (long long)rl.rlim_max);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need) return 0;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) return -1;
  rl.rlim_cur = need;
  CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
  return 0;
}

/* Peak resident memory of this process (VmHWM), KiB. */
static long peak_rss_kib(void) { return proc_kib("/proc/self/status", "VmHWM"); }

/* The server's state of one connection, indexed by its descriptor. */
struct conn {
  unsigned char header[kHeader];
  uint32_t index, length;   /* valid once `got` >= kHeader */
  uint32_t got, sent;       /* request bytes read, reply bytes written */
  unsigned char* reply;     /* made once the request is whole */
};

/* Reads what `fd` has; 1 when the peer ended the stream (the request must
 * be whole and the reply sent by then), 0 otherwise. */
static int server_read(int fd, struct conn* c, int n, const unsigned char* seen) {
  unsigned char buf[kMaxBytes];
  ssize_t got = read(fd, buf, sizeof(buf));
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  CHECK(got >= 0);
  if (got == 0) {
    CHECK(c->got >= kHeader && c->got == c->length && c->sent == reply_length(c->index));
    return 1;
  }
  for (ssize_t k = 0; k < got; ++k, ++c->got) {
    if (c->got < kHeader) {
      c->header[c->got] = buf[k];
      if (c->got + 1 == kHeader) {
        memcpy(&c->index, c->header, 4);
        memcpy(&c->length, c->header + 4, 4);
        CHECK(c->index < (uint32_t)n && !seen[c->index]);
        CHECK_EQ(c->length, request_length(c->index));
      }
      continue;
    }
    if (c->got >= c->length || buf[k] != message_byte(c->index, 0, c->got)) {
      fprintf(stderr, "FAIL: connection %u: request byte %u is wrong\n", c->index, c->got);
      exit(1);
    }
  }
  return 0;
}

/* Writes what the socket takes of the reply; 1 once all of it is sent. */
static int server_write(int fd, struct conn* c) {
  uint32_t len = reply_length(c->index);
  while (c->sent < len) {
    ssize_t w = write(fd, c->reply + c->sent, len - c->sent);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    CHECK(w > 0);
    c->sent += (uint32_t)w;
  }
  return 1;
}

static int run_server(int port, int n) {
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  struct conn* conns = calloc(rl.rlim_cur, sizeof(struct conn));
  unsigned char* seen = calloc((size_t)n, 1);
  CHECK(conns != NULL && seen != NULL);
  int l = listen_on_port("127.0.0.1", port, 4096);
  CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
  int accepted = 0, closed = 0, open = 0, most_open = 0;
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
          CHECK((rlim_t)c < rl.rlim_cur);
          memset(&conns[c], 0, sizeof(conns[c]));
          ++accepted;
          if (++open > most_open) most_open = open;
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
          CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) == 0);
        }
        continue;
      }
      struct conn* c = &conns[fd];
      if ((ready[i].events & EPOLLOUT) && server_write(fd, c)) {
        struct epoll_event cev = {.events = EPOLLIN, .data.fd = fd};
        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev) == 0);
      }
      if (!(ready[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      int had_request = c->got >= kHeader && c->got == c->length;
      if (server_read(fd, c, n, seen)) {
        free(c->reply);
        CHECK(close(fd) == 0); /* also leaves the epoll set */
        ++closed;
        --open;
        continue;
      }
      if (!had_request && c->got >= kHeader && c->got == c->length) {
        seen[c->index] = 1;
        uint32_t len = reply_length(c->index);
        c->reply = malloc(len);
        CHECK(c->reply != NULL);
        fill_message(c->reply, c->index, 1, len);
        if (!server_write(fd, c)) {
          struct epoll_event cev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
          CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev) == 0);
        }
      }
    }
  }
  CHECK_EQ(accepted, n);
  for (int i = 0; i < n; ++i) CHECK(seen[i]);
  close(ep);
  close(l);
  printf("served %d, %d open at once\n", accepted, most_open);
  printf("server peak resident: %ld KiB\n", peak_rss_kib());
  printf("PASS\n");
  return 0;
}

static int run_client(int port, int n) {
  int* fds = calloc((size_t)n, sizeof(int));
  CHECK(fds != NULL);
  long shmem_before = shmem_kib();
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
  unsigned char want[kMaxBytes], got[kMaxBytes];
  uint64_t sent = 0, received = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t len = request_length((uint32_t)i);
    fill_message(want, (uint32_t)i, 0, len);
    write_all(fds[i], want, len);
    sent += len;
  }
  for (int i = 0; i < n; ++i) {
    uint32_t len = reply_length((uint32_t)i);
    fill_message(want, (uint32_t)i, 1, len);
    read_exact(fds[i], got, len);
    if (memcmp(want, got, len) != 0) {
      fprintf(stderr, "FAIL: connection %d: its reply has other bytes\n", i);
      return 1;
    }
    received += len;
  }
  int64_t exchanged = now_ms();
  long shmem = shmem_kib() - shmem_before;
  printf("exchange: %d connections, %llu bytes sent, %llu received, every byte checked\n",
         n, (unsigned long long)sent, (unsigned long long)received);
  for (int i = 0; i < n; ++i) CHECK(close(fds[i]) == 0);
  free(fds);
  printf("setup: %lld ms (%.0f/s), exchange %lld ms, close %lld ms\n",
         (long long)(connected - start),
         n * 1000.0 / (double)(connected - start > 0 ? connected - start : 1),
         (long long)(exchanged - connected), (long long)(now_ms() - exchanged));
  printf("shared memory in all: %ld KiB\n", shmem);
  printf("client peak resident: %ld KiB\n", peak_rss_kib());
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  ptest_start(150);
  CHECK(argc == 4);
  int port = atoi(argv[2]), n = atoi(argv[3]);
  CHECK(n > 0);
  if (raise_soft_limit((rlim_t)n + 64) != 0) {
    printf("SKIP: the hard RLIMIT_NOFILE is below %d\n", n + 64);
    return 0;
  }
  if (!strcmp(argv[1], "server")) return run_server(port, n);
  if (!strcmp(argv[1], "client")) return run_client(port, n);
  return 2;
}
