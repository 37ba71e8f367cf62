/* The descriptor numbers socket calls return are the kernel's: accept()
 * and socket() give the lowest free number, whatever vsocket's own
 * descriptors are doing (a server's claim makes a wait socket; before,
 * accept() returned that socket's number instead of the one the kernel
 * chose).  inetd-style servers rely on it: close(0), then accept() is 0.
 * Prints each number as an OBS line for the kernel comparison.
 * usage: accept_numbers */
#include "ptest.h"

static int echo_once(int from, int to) {
  char b[8];
  write_all(from, "n", 1);
  read_exact(to, b, 1);
  return b[0] == 'n';
}

int main(void) {
  ptest_start(30);
  int c, a;
  make_pair(&c, &a);
  int b = dup(a);
  int l = listen_on("127.0.0.1");
  int c2 = connect_to("127.0.0.1", port_of(l));
  printf("OBS pair c=%d a=%d dup=%d listener=%d client=%d\n", c, a, b, l, c2);
  /* The lowest free number is a's: the accepted connection takes it. */
  CHECK(close(a) == 0);
  int a2 = accept(l, NULL, NULL);
  CHECK(a2 >= 0);
  printf("OBS accepted into the freed number: %d\n", a2);
  CHECK(echo_once(c2, a2));
  /* inetd: stdin closed, the next connection accepted is descriptor 0. */
  int c4 = connect_to("127.0.0.1", port_of(l));
  printf("OBS client: %d\n", c4);
  CHECK(close(0) == 0);
  int a4 = accept(l, NULL, NULL);
  printf("OBS accepted after close(0): %d\n", a4);
  CHECK_EQ(a4, 0);
  CHECK(echo_once(c4, a4));
  CHECK(echo_once(a4, c4));
  printf("PASS\n");
  return 0;
}
