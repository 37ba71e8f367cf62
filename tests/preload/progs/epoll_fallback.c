/* An epoll registration follows a connection whose shared-memory offer
 * falls back to TCP because the listener did not accept in time (the
 * driver sets VSOCKET_CLAIM_TIMEOUT_MS=200): the fallback puts the TCP
 * socket behind the application's descriptor number, and the client's
 * event loop must still hear the server's reply on it. */
#include "ptest.h"

#include <sys/epoll.h>

int main(void) {
  ptest_start(30);
  int l = listen_on("127.0.0.1");
  int c = connect_to("127.0.0.1", port_of(l));
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = c};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
  CHECK_EQ(write(c, "req", 3), 3);
  /* Past the claim deadline, a call on the socket gives the offer up. */
  sleep_ms(400);
  char buf[16];
  CHECK_ERR(recv(c, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  CHECK_EQ(read(s, buf, sizeof(buf)), 3);
  CHECK(memcmp(buf, "req", 3) == 0);
  CHECK_EQ(write(s, "reply", 5), 5);
  struct epoll_event out;
  CHECK_EQ(epoll_wait(ep, &out, 1, 3000), 1);
  CHECK_EQ(out.data.fd, c);
  CHECK(out.events & EPOLLIN);
  CHECK_EQ(read(c, buf, sizeof(buf)), 5);
  CHECK(memcmp(buf, "reply", 5) == 0);
  /* Removing the registration works on the new object. */
  CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL) == 0);
  close(ep);
  close(c);
  close(s);
  close(l);
  printf("PASS\n");
  return 0;
}
