/* Socket I/O through io_uring (liburing, linked dynamically as programs
 * link it): a server accepts, receives and sends with IORING_OP_ACCEPT,
 * IORING_OP_RECV and IORING_OP_SEND, which the kernel runs without libc,
 * so vsocket never sees them.  Its clients are plain libc programs (forked
 * before the server starts its ring).  Everything must work as on kernel
 * TCP: a connection the server had before its ring (it moves to TCP), and
 * new clients, which must not wait for a claim that never comes (the
 * 3 s claim timeout): each round trip here is held to 1 s.
 * usage: io_uring_echo */
#include <liburing.h>
#include <sys/wait.h>

#include "ptest.h"

static struct io_uring ring;

/* Submits one prepared SQE and waits for its completion: its result. */
static int complete_one(void) {
  CHECK_EQ(io_uring_submit(&ring), 1);
  struct io_uring_cqe* cqe;
  CHECK_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
  int res = cqe->res;
  io_uring_cqe_seen(&ring, cqe);
  return res;
}

static int ring_accept(int l) {
  io_uring_prep_accept(io_uring_get_sqe(&ring), l, NULL, NULL, 0);
  return complete_one();
}

static void ring_echo_line(int s) {
  char buf[64];
  io_uring_prep_recv(io_uring_get_sqe(&ring), s, buf, sizeof(buf), 0);
  int n = complete_one();
  if (n <= 0) {
    fprintf(stderr, "FAIL io_uring recv: %d (%s)\n", n, n < 0 ? strerror(-n) : "eof");
    exit(1);
  }
  io_uring_prep_send(io_uring_get_sqe(&ring), s, buf, (size_t)n, 0);
  int sent = complete_one();
  if (sent != n) {
    fprintf(stderr, "FAIL io_uring send: %d of %d (%s)\n", sent, n, sent < 0 ? strerror(-sent) : "");
    exit(1);
  }
}

/* The client's round trip: 1 s at most. */
static void round_trip(int c, const char* line) {
  size_t len = strlen(line);
  int64_t start = now_ms();
  write_all(c, line, len);
  char buf[64];
  read_exact(c, buf, len);
  CHECK(memcmp(buf, line, len) == 0);
  int64_t took = now_ms() - start;
  if (took > 1000) {
    fprintf(stderr, "FAIL round trip took %lld ms\n", (long long)took);
    exit(1);
  }
}

int main(void) {
  ptest_start(60);
  int l = listen_on("127.0.0.1");
  int port = port_of(l);
  /* A connection made before the ring: a fast path until then. */
  int old_c, old_s;
  make_pair(&old_c, &old_s);
  write_all(old_c, "before\n", 7);
  char b[8];
  read_exact(old_s, b, 7);

  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* The client: plain libc calls, no io_uring. */
    CHECK(close(l) == 0);
    CHECK(close(old_s) == 0);
    usleep(200 * 1000); /* the server's ring is up by now */
    round_trip(old_c, "old connection\n");
    for (int i = 0; i < 3; ++i) {
      int c = connect_to("127.0.0.1", port);
      round_trip(c, "new connection\n");
      CHECK(close(c) == 0);
    }
    CHECK(close(old_c) == 0);
    _exit(0);
  }
  CHECK(close(old_c) == 0);
  CHECK_EQ(io_uring_queue_init(8, &ring, 0), 0);
  ring_echo_line(old_s);
  for (int i = 0; i < 3; ++i) {
    int s = ring_accept(l);
    CHECK(s >= 0);
    ring_echo_line(s);
    CHECK(close(s) == 0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  io_uring_queue_exit(&ring);
  CHECK(close(old_s) == 0);
  CHECK(close(l) == 0);
  printf("PASS\n");
  return 0;
}
