/* A listener closed with a connection still in its backlog, after the
 * client wrote to it: kernel TCP resets the connection, and the client
 * sees ECONNRESET once (from its next receive, or from SO_ERROR), then end
 * of stream and EPIPE.  Under vsocket the client's bytes sat in an offer
 * nobody claimed; its move to TCP must not turn the reset into a clean end
 * of stream (CPython's asyncio test_create_connection_local_addr met this
 * path).  Two rounds: a receive first, SO_ERROR first.
 * usage: listener_closed */
#include "ptest.h"

static int unaccepted_connection(void) {
  const char* ip = getenv("PTEST_IP");
  if (!ip || !*ip) ip = "127.0.0.1";
  int l = listen_on(ip);
  int c = connect_to(ip, port_of(l));
  write_all(c, "GET / HTTP/1.0\r\n\r\n", 18);
  CHECK(close(l) == 0); /* the kernel resets what the backlog held */
  /* POLLHUP on both; kernel TCP adds POLLERR until the error is taken
   * (docs/COMPATIBILITY.md: not after vsocket's move).  Kernel TCP raises
   * POLLIN and POLLHUP together; under vsocket the first wake-up may come
   * while the connection is still moving to TCP, with POLLHUP a moment
   * later, so wait for it. */
  int64_t deadline = now_ms() + 5000;
  while (!(wait_for(c, POLLIN, 100) & POLLHUP)) CHECK(now_ms() < deadline);
  return c;
}

int main(void) {
  ptest_start(30);
  char buf[16];

  int c = unaccepted_connection();
  CHECK_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
  CHECK_EQ(recv(c, buf, sizeof(buf), 0), 0);
  int err = -1;
  socklen_t len = sizeof(err);
  CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
  CHECK_EQ(err, 0);
  CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
  CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
  CHECK(close(c) == 0);

  c = unaccepted_connection();
  err = -1;
  CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
  CHECK_EQ(err, ECONNRESET);
  CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
  CHECK_EQ(err, 0);
  CHECK_EQ(recv(c, buf, sizeof(buf), 0), 0);
  CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
  CHECK(close(c) == 0);

  printf("PASS\n");
  return 0;
}
