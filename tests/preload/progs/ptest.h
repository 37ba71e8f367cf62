/* Helpers for the preload test programs.  These programs use ordinary libc
 * socket calls only (never vsocket_*): the drivers run them with
 * libvsocket_preload.so preloaded and check the path in VSOCKET_STATS.
 * A failed check prints "FAIL file:line: what (errno)" and exits 1; a
 * program that passes prints "PASS" last.  Every program arms alarm() so
 * that nothing can hang. */
#ifndef VSOCKET_TESTS_PRELOAD_PTEST_H_
#define VSOCKET_TESTS_PRELOAD_PTEST_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      int e_ = errno;                                                      \
      fprintf(stderr, "FAIL %s:%d: %s (errno %d: %s)\n", __FILE__,         \
              __LINE__, #cond, e_, strerror(e_));                          \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

#define CHECK_EQ(a, b)                                                     \
  do {                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                    \
    if (a_ != b_) {                                                        \
      int e_ = errno;                                                      \
      fprintf(stderr, "FAIL %s:%d: %s == %s: %lld != %lld (errno %d: %s)\n", \
              __FILE__, __LINE__, #a, #b, a_, b_, e_, strerror(e_));       \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* -1 with the expected errno. */
#define CHECK_ERR(expr, err)                                               \
  do {                                                                     \
    errno = 0;                                                             \
    long long r_ = (long long)(expr);                                      \
    int e_ = errno;                                                        \
    if (r_ != -1 || e_ != (err)) {                                         \
      fprintf(stderr, "FAIL %s:%d: %s: got %lld errno %d (%s), want -1 %s\n", \
              __FILE__, __LINE__, #expr, r_, e_, strerror(e_), #err);      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static inline void ptest_start(unsigned seconds) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  alarm(seconds); /* default action kills the process */
}

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Fills `addr` for text address `ip` ("127.0.0.1", "::1", "::ffff:...",
 * "0.0.0.0", "::") and `port`.  Returns the length. */
static inline socklen_t make_addr(const char* ip, int port,
                                  struct sockaddr_storage* addr) {
  memset(addr, 0, sizeof(*addr));
  if (strchr(ip, ':')) {
    struct sockaddr_in6* a6 = (struct sockaddr_in6*)addr;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    CHECK(inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1);
    return sizeof(*a6);
  }
  struct sockaddr_in* a4 = (struct sockaddr_in*)addr;
  a4->sin_family = AF_INET;
  a4->sin_port = htons((uint16_t)port);
  CHECK(inet_pton(AF_INET, ip, &a4->sin_addr) == 1);
  return sizeof(*a4);
}

static inline int port_of(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  CHECK(getsockname(fd, (struct sockaddr*)&ss, &len) == 0);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6*)&ss)->sin6_port);
  return ntohs(((struct sockaddr_in*)&ss)->sin_port);
}

/* A listener on `ip`:`port` (0: ephemeral) with room for `backlog`. */
static inline int listen_on_port(const char* ip, int port, int backlog) {
  struct sockaddr_storage addr;
  socklen_t len = make_addr(ip, port, &addr);
  int fd = socket(addr.ss_family, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  int one = 1;
  CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
  CHECK(bind(fd, (struct sockaddr*)&addr, len) == 0);
  CHECK(listen(fd, backlog) == 0);
  return fd;
}

/* A listener on `ip`, ephemeral port. */
static inline int listen_on(const char* ip) { return listen_on_port(ip, 0, 64); }

/* A blocking connect to `ip`:`port`. */
static inline int connect_to(const char* ip, int port) {
  struct sockaddr_storage addr;
  socklen_t len = make_addr(ip, port, &addr);
  int fd = socket(addr.ss_family, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK(connect(fd, (struct sockaddr*)&addr, len) == 0);
  return fd;
}

/* A connected pair over loopback: the client connects (the kernel finishes
 * the handshake from the backlog), then the listener accepts. */
static inline void make_pair_on(const char* listen_ip, const char* connect_ip,
                                int* client, int* server) {
  int l = listen_on(listen_ip);
  *client = connect_to(connect_ip, port_of(l));
  *server = accept(l, NULL, NULL);
  CHECK(*server >= 0);
  CHECK(close(l) == 0);
}

/* 127.0.0.1, or $PTEST_IP (the RDMA guest's own address: loopback has no
 * RDMA device). */
static inline const char* test_ip(void) {
  const char* ip = getenv("PTEST_IP");
  return ip != NULL && *ip != '\0' ? ip : "127.0.0.1";
}

/* A connected pair on test_ip(). */
static inline void make_pair(int* client, int* server) {
  make_pair_on(test_ip(), test_ip(), client, server);
}

/* Byte i of a test stream. */
/* A connected pair, then fork(): the child keeps only the server end
 * (*client is closed and -1 there).  Returns fork()'s result. */
static inline pid_t fork_with_pair(int* client, int* server) {
  make_pair(client, server);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(*client);
    *client = -1;
  }
  return pid;
}

static inline unsigned char pattern_byte(uint64_t i) {
  return (unsigned char)((i * 2654435761u) >> 13);
}

static inline void fill_pattern(unsigned char* buf, size_t len, uint64_t start) {
  for (size_t i = 0; i < len; ++i) buf[i] = pattern_byte(start + i);
}

static inline int check_pattern(const unsigned char* buf, size_t len,
                                uint64_t start) {
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] != pattern_byte(start + i)) return 0;
  }
  return 1;
}

static inline void write_all(int fd, const void* buf, size_t len) {
  const char* p = (const char*)buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    CHECK(n > 0);
    p += n;
    len -= (size_t)n;
  }
}

static inline void read_exact(int fd, void* buf, size_t len) {
  char* p = (char*)buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    CHECK(n > 0);
    p += n;
    len -= (size_t)n;
  }
}

static inline void set_nonblocking(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  CHECK(fl >= 0);
  CHECK(fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) == 0);
}

/* Waits up to timeout_ms for `events` on fd; returns revents (0 on timeout). */
static inline short wait_for(int fd, short events, int timeout_ms) {
  struct pollfd pfd = {fd, events, 0};
  int r = poll(&pfd, 1, timeout_ms);
  CHECK(r >= 0);
  return r == 0 ? 0 : pfd.revents;
}

/* The "<key>: <n> kB" line of a /proc file (/proc/meminfo,
 * /proc/self/status), in KiB; -1 if the file has no such line. */
static inline long proc_kib(const char* path, const char* key) {
  FILE* f = fopen(path, "r");
  CHECK(f != NULL);
  char line[256];
  size_t key_len = strlen(key);
  long kib = -1;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, key_len) == 0 && line[key_len] == ':' &&
        sscanf(line + key_len + 1, " %ld kB", &kib) == 1)
      break;
  }
  fclose(f);
  return kib;
}

/* Shmem of /proc/meminfo, in KiB: the shared memory of the whole host. */
static inline long shmem_kib(void) { return proc_kib("/proc/meminfo", "Shmem"); }

/* Open descriptors of this process (the entries of /proc/self/fd, less
 * the one reading it). */
static inline int open_descriptors(void) {
  DIR* d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  int count = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] != '.') ++count;
  }
  closedir(d);
  return count - 1;
}

#endif /* VSOCKET_TESTS_PRELOAD_PTEST_H_ */
