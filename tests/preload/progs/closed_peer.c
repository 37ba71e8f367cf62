/* Writing to a peer that closed its connection, as kernel TCP behaves: the
 * peer's close looks like a FIN, so ONE send still succeeds (the peer's
 * kernel then answers with an RST); the bytes the peer wrote before closing
 * are read, then end of stream; later sends fail with EPIPE.  Programs rely
 * on the first send succeeding: redis-benchmark, told "-DENIED" by a server
 * that closes at once, reads the error only after its write went through.
 * Two rounds: the peer closes before or after our first send was ever
 * attempted on the connection. */
#include "ptest.h"

static void round_trip(int delay_ms) {
  int c, s;
  make_pair(&c, &s);
  write_all(s, "-DENIED\r\n", 9);
  CHECK(close(s) == 0);
  sleep_ms(delay_ms);
  /* The one send that still succeeds. */
  CHECK_EQ(send(c, "PING\r\n", 6, MSG_NOSIGNAL), 6);
  sleep_ms(50); /* kernel TCP: the RST comes back */
  char buf[32];
  CHECK_EQ(recv(c, buf, sizeof(buf), MSG_WAITALL), 9);
  CHECK(memcmp(buf, "-DENIED\r\n", 9) == 0);
  CHECK_EQ(recv(c, buf, sizeof(buf), 0), 0);
  CHECK_ERR(send(c, "PING\r\n", 6, MSG_NOSIGNAL), EPIPE);
  CHECK_ERR(send(c, "PING\r\n", 6, MSG_NOSIGNAL), EPIPE);
  CHECK(close(c) == 0);
}

int main(void) {
  ptest_start(30);
  round_trip(50);
  round_trip(0);
  printf("PASS\n");
  return 0;
}
