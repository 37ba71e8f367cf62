/* A shared-memory connection inherited across exec by a preloaded image is
 * handed over and keeps working; everything around it fails cleanly.
 *  1. fork + execv of a preloaded helper that echoes 4 MiB both ways,
 *     poll()s the socket and closes it: the peer sees every byte and EOF.
 *  2. the same through execvp, with a few bytes, through a dup'ed number,
 *     a non-blocking socket (the flag survives) and epoll for readiness;
 *     while another thread of the exec'ing process spins in read() on it.
 *  3. exec into an image that is not preloaded: the connection moves to
 *     kernel TCP before the exec; the new image reads the bytes already
 *     sent and answers, and both ends in this process go on over TCP.
 *  4. an exec that fails leaves the socket working in the caller.
 *  5. a listener inherited across exec accepts (on shared memory when
 *     preloaded).
 *  6. a hostile VSOCKET_INHERITED naming a real inherited socket (passed by
 *     a raw execve system call, which no interposer sees): clean reset.
 *  7. an exec'd image that inherits a connection and exits without closing
 *     it stops holding it: the peer then sees EOF, not a reset.
 *  8. SO_RCVTIMEO set before exec bounds a read in the new image.
 *  9. a process re-execs itself (no fork) holding both ends of a connection
 *     with unread data in flight, and a listener: all keep working.
 * usage: exec_handover            (the scenarios)
 *        exec_handover execvp     (scenario 2 alone: run it with a long
 *                                  VSOCKET_SPIN_US)
 *        exec_handover malformed  (run with a bad VSOCKET_INHERITED: the
 *                                  standard descriptors still work) */
#include "ptest.h"

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char** environ;

static const size_t kBig = 4u << 20;
static char self[4096];

static int shm_mode(void) {
  const char* mode = getenv("PTEST_MODE");
  return mode && !strcmp(mode, "shm");
}

/* Helper: echo everything until EOF, then close.  With `nonblocking`, the
 * socket must arrive non-blocking and is waited for with epoll first. */
static int helper_echo(int fd, int nonblocking) {
  CHECK(getenv("VSOCKET_INHERITED") == NULL); /* not for grandchildren */
  if (nonblocking) {
    CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    char byte;
    CHECK_ERR(read(fd, &byte, 1), EAGAIN);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data = {.fd = fd}};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    struct epoll_event got;
    CHECK_EQ(epoll_wait(ep, &got, 1, 10000), 1);
    CHECK_EQ(got.data.fd, fd);
    CHECK(got.events & EPOLLIN);
    close(ep);
    set_nonblocking(fd, 0);
  }
  CHECK(wait_for(fd, POLLIN, 10000) & POLLIN);
  CHECK(wait_for(fd, POLLOUT, 1000) & POLLOUT);
  static char buf[65536];
  uint64_t total = 0, sum = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    CHECK(n >= 0);
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) sum += (unsigned char)buf[i];
    write_all(fd, buf, (size_t)n);
    total += (uint64_t)n;
  }
  CHECK(close(fd) == 0);
  printf("helper echoed=%llu sum=%llu\n", (unsigned long long)total,
         (unsigned long long)sum);
  return 0;
}

/* Helper run without the interposer: the connection is kernel TCP. */
static int helper_plain(int fd) {
  char buf[8];
  read_exact(fd, buf, 4);
  CHECK(memcmp(buf, "tcp!", 4) == 0);
  write_all(fd, "ack!", 4);
  printf("helper plain ok\n");
  return 0;
}

/* Helper run after a hostile handover. */
static int helper_reset(int fd) {
  char buf[64];
  if (shm_mode()) {
    CHECK_ERR(read(fd, buf, sizeof(buf)), ECONNRESET);
    CHECK_EQ(read(fd, buf, sizeof(buf)), 0);
    CHECK_ERR(send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
  } else {
    CHECK_EQ(read(fd, buf, sizeof(buf)), 4);
    CHECK(memcmp(buf, "tcp!", 4) == 0);
  }
  printf("helper reset ok\n");
  return 0;
}

/* Helper: accept one connection on an inherited listener, answer it. */
static int helper_accept(int lfd) {
  int s = accept(lfd, NULL, NULL);
  CHECK(s >= 0);
  char buf[8];
  read_exact(s, buf, 5);
  CHECK(memcmp(buf, "hello", 5) == 0);
  write_all(s, "world", 5);
  CHECK_EQ(read(s, buf, sizeof(buf)), 0);
  CHECK(close(s) == 0);
  CHECK(close(lfd) == 0);
  printf("helper accepted\n");
  return 0;
}

/* Helper: a read with nothing to read times out (SO_RCVTIMEO from the
 * image before exec), then answer and close. */
static int helper_timeout(int fd) {
  char byte;
  int64_t start = now_ms();
  CHECK_ERR(read(fd, &byte, 1), EAGAIN);
  int64_t waited = now_ms() - start;
  CHECK(waited >= 80 && waited < 5000);
  write_all(fd, "done", 4);
  CHECK(close(fd) == 0);
  printf("helper timed out after %lld ms\n", (long long)waited);
  return 0;
}

/* Helper: the re-exec'd image of scenario 9. */
static int helper_reexec(int c, int s, int l) {
  char buf[16];
  read_exact(s, buf, 6); /* written before the exec, never read */
  CHECK(memcmp(buf, "before", 6) == 0);
  write_all(s, "after", 5);
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "after", 5) == 0);
  int c2 = connect_to("127.0.0.1", port_of(l));
  int s2 = accept(l, NULL, NULL);
  CHECK(s2 >= 0);
  write_all(c2, "new", 3);
  read_exact(s2, buf, 3);
  CHECK(memcmp(buf, "new", 3) == 0);
  CHECK(close(c2) == 0);
  CHECK_EQ(read(s2, buf, sizeof(buf)), 0);
  CHECK(close(s2) == 0);
  CHECK(close(c) == 0);
  CHECK_EQ(read(s, buf, sizeof(buf)), 0);
  CHECK(close(s) == 0);
  CHECK(close(l) == 0);
  printf("helper re-exec ok\n");
  return 0;
}

static void reap(pid_t pid) {
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
}

struct sender {
  int fd;
  size_t len;
};

static void* send_pattern(void* arg) {
  struct sender* s = (struct sender*)arg;
  static unsigned char buf[65536];
  for (size_t off = 0; off < s->len;) {
    size_t n = s->len - off < sizeof(buf) ? s->len - off : sizeof(buf);
    fill_pattern(buf, n, off);
    write_all(s->fd, buf, n);
    off += n;
  }
  CHECK(shutdown(s->fd, SHUT_WR) == 0);
  return NULL;
}

/* Sends `len` pattern bytes on c, checks they come back, then EOF. */
static void exchange_through_helper(int c, size_t len) {
  struct sender snd = {c, len};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, send_pattern, &snd) == 0);
  static unsigned char buf[65536];
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(c, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    CHECK(n > 0);
    CHECK(check_pattern(buf, (size_t)n, got));
    got += (size_t)n;
  }
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0); /* the helper closed: EOF */
  CHECK(close(c) == 0);
}

static void scenario_execv(void) {
  int c, s;
  make_pair(&c, &s);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(c);
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", s);
    char* argv[] = {self, "echo", arg, NULL};
    execv(self, argv);
    _exit(127);
  }
  CHECK(close(s) == 0); /* the helper holds the connection now */
  exchange_through_helper(c, kBig);
  reap(pid);
}

static void* read_one(void* arg) {
  char byte;
  read(*(int*)arg, &byte, 1); /* dies with the exec before any data comes */
  return NULL;
}

static void scenario_execvp(void) {
  int c, s;
  make_pair(&c, &s);
  /* a second number for the same connection, inherited too */
  int s2 = dup(s);
  CHECK(s2 >= 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(c);
    CHECK(fcntl(s, F_SETFD, FD_CLOEXEC) == 0); /* only s2 crosses */
    /* A reader that busy-polls (VSOCKET_SPIN_US is high in this process
     * and its exec'd image) when the exec kills it. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_one, &s2) == 0);
    sleep_ms(50);
    set_nonblocking(s2, 1);
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", s2);
    char* argv[] = {"exec_handover", "echo-nb", arg, NULL};
    execvp(self, argv);
    _exit(127);
  }
  CHECK(close(s) == 0);
  CHECK(close(s2) == 0);
  sleep_ms(300); /* the spinning reader is gone by then */
  /* Data alone (no end of stream behind it) must wake the helper. */
  unsigned char buf[1000];
  fill_pattern(buf, sizeof(buf), 0);
  write_all(c, buf, sizeof(buf));
  memset(buf, 0, sizeof(buf));
  read_exact(c, buf, sizeof(buf));
  CHECK(check_pattern(buf, sizeof(buf), 0));
  CHECK(shutdown(c, SHUT_WR) == 0);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK(close(c) == 0);
  reap(pid);
}

static void scenario_not_preloaded(void) {
  int c, s;
  make_pair(&c, &s);
  CHECK_EQ(write(c, "tcp!", 4), 4);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    static char* env[256];
    int n = 0;
    for (char** e = environ; *e && n < 254; ++e) {
      if (strncmp(*e, "LD_PRELOAD=", 11) != 0) env[n++] = *e;
    }
    env[n] = NULL;
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", s);
    char* argv[] = {self, "plain", arg, NULL};
    execve(self, argv, env);
    _exit(127);
  }
  reap(pid);
  char buf[8];
  read_exact(c, buf, 4);
  CHECK(memcmp(buf, "ack!", 4) == 0);
  /* Both ends in this process follow the move. */
  CHECK_EQ(write(c, "abc", 3), 3);
  read_exact(s, buf, 3);
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);
}

static void scenario_exec_fails(void) {
  int c, s;
  make_pair(&c, &s);
  char* argv[] = {"nope", NULL};
  CHECK_ERR(execv("/nonexistent/exec_handover", argv), ENOENT);
  CHECK_ERR(execvp("/nonexistent/exec_handover", argv), ENOENT);
  CHECK_ERR(execl("/nonexistent/exec_handover", "nope", (char*)NULL), ENOENT);
  /* both ways, readiness included */
  char buf[8];
  CHECK_EQ(write(c, "ping", 4), 4);
  CHECK(wait_for(s, POLLIN, 3000) & POLLIN);
  read_exact(s, buf, 4);
  CHECK(memcmp(buf, "ping", 4) == 0);
  CHECK(wait_for(s, POLLOUT, 3000) & POLLOUT);
  CHECK_EQ(write(s, "pong", 4), 4);
  read_exact(c, buf, 4);
  CHECK(memcmp(buf, "pong", 4) == 0);
  CHECK(close(s) == 0);
  CHECK(wait_for(c, POLLIN, 3000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK(close(c) == 0);
}

static void scenario_listener(void) {
  int l = listen_on("127.0.0.1");
  int port = port_of(l);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", l);
    execl(self, self, "accept", arg, (char*)NULL);
    _exit(127);
  }
  CHECK(close(l) == 0);
  int c = connect_to("127.0.0.1", port);
  write_all(c, "hello", 5);
  char buf[8];
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "world", 5) == 0);
  CHECK(shutdown(c, SHUT_WR) == 0);
  reap(pid);
  CHECK(close(c) == 0);
}

static void scenario_hostile(void) {
  int c, s;
  make_pair(&c, &s);
  if (!shm_mode()) CHECK_EQ(write(c, "tcp!", 4), 4);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    static char* env[256];
    static char var[128];
    int n = 0;
    for (char** e = environ; *e && n < 253; ++e) env[n++] = *e;
    /* the private descriptors are a file, stderr and the client's end */
    snprintf(var, sizeof(var), "VSOCKET_INHERITED=1;shm,s,1,2,%d,%d", c, s);
    env[n++] = var;
    env[n] = NULL;
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", s);
    char* argv[] = {self, "reset", arg, NULL};
    syscall(SYS_execve, self, argv, env);
    _exit(127);
  }
  reap(pid);
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);
}

static void scenario_exit_without_close(void) {
  int c, s;
  make_pair(&c, &s);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execlp("true", "true", (char*)NULL); /* inherits c and s */
    _exit(127);
  }
  reap(pid);
  write_all(s, "last", 4);
  CHECK(close(s) == 0);
  char buf[8];
  read_exact(c, buf, 4);
  CHECK(memcmp(buf, "last", 4) == 0);
  CHECK(wait_for(c, POLLIN, 3000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK(close(c) == 0);
}

static void scenario_timeout(void) {
  int c, s;
  make_pair(&c, &s);
  struct timeval tv = {0, 100000};
  CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(c);
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", s);
    execl(self, self, "timeout", arg, (char*)NULL);
    _exit(127);
  }
  CHECK(close(s) == 0);
  char buf[8];
  read_exact(c, buf, 4);
  CHECK(memcmp(buf, "done", 4) == 0);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK(close(c) == 0);
  reap(pid);
}

static void scenario_reexec(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* This child is the process that re-execs itself. */
    int c, s;
    make_pair(&c, &s);
    int l = listen_on("127.0.0.1");
    write_all(c, "before", 6);
    char a[16], b[16], d[16];
    snprintf(a, sizeof(a), "%d", c);
    snprintf(b, sizeof(b), "%d", s);
    snprintf(d, sizeof(d), "%d", l);
    execl(self, self, "reexec", a, b, d, (char*)NULL);
    _exit(127);
  }
  reap(pid);
}

static int malformed(void) {
  /* The constructor has seen a bad VSOCKET_INHERITED: nothing it names
   * was touched and it is gone. */
  CHECK(getenv("VSOCKET_INHERITED") == NULL || getenv("LD_PRELOAD") == NULL);
  CHECK(fcntl(0, F_GETFD) >= 0);
  CHECK(fcntl(1, F_GETFD) >= 0);
  CHECK(fcntl(2, F_GETFD) >= 0);
  int c, s;
  make_pair(&c, &s);
  CHECK_EQ(write(c, "x", 1), 1);
  char b;
  CHECK_EQ(read(s, &b, 1), 1);
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  ptest_start(60);
  if (argc == 2 && !strcmp(argv[1], "malformed")) return malformed();
  if (argc == 3 && !strcmp(argv[1], "echo")) return helper_echo(atoi(argv[2]), 0);
  if (argc == 3 && !strcmp(argv[1], "echo-nb")) return helper_echo(atoi(argv[2]), 1);
  if (argc == 3 && !strcmp(argv[1], "reset")) return helper_reset(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "plain")) return helper_plain(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "accept")) return helper_accept(atoi(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "timeout")) return helper_timeout(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "reexec"))
    return helper_reexec(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(len > 0);
  self[len] = '\0';
  if (argc == 2 && !strcmp(argv[1], "execvp")) {
    scenario_execvp();
    printf("PASS\n");
    return 0;
  }
  scenario_execv();
  printf("execv ok\n");
  scenario_execvp();
  printf("execvp ok\n");
  scenario_not_preloaded();
  printf("not preloaded ok\n");
  scenario_exec_fails();
  printf("exec failure ok\n");
  scenario_listener();
  printf("listener ok\n");
  scenario_hostile();
  printf("hostile ok\n");
  scenario_exit_without_close();
  printf("exit without close ok\n");
  scenario_timeout();
  printf("timeout ok\n");
  scenario_reexec();
  printf("re-exec ok\n");
  printf("PASS\n");
  return 0;
}
