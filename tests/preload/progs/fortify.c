/* Built with -O2 -D_FORTIFY_SOURCE=2: read/recv/recvfrom into buffers of
 * known size become __read_chk/__recv_chk/__recvfrom_chk, which glibc
 * implements with its internal calls.  They must still read the
 * connection's data. */
#include "ptest.h"

static volatile size_t g_len = 32; /* not a compile-time constant */

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  char buf[64];
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(write(c, "fortified-read", 14), 14);
    CHECK_EQ(read(s, buf, g_len), 14);
    CHECK(memcmp(buf, "fortified-read", 14) == 0);
    CHECK_EQ(send(c, "fortified-recv", 14, 0), 14);
    CHECK_EQ(recv(s, buf, g_len, 0), 14);
    CHECK(memcmp(buf, "fortified-recv", 14) == 0);
    CHECK_EQ(send(s, "fortified-from", 14, 0), 14);
    struct sockaddr_storage from;
    socklen_t from_len = sizeof(from);
    CHECK_EQ(recvfrom(c, buf, g_len, 0, (struct sockaddr*)&from, &from_len), 14);
    CHECK(memcmp(buf, "fortified-from", 14) == 0);
    CHECK_EQ(from.ss_family, AF_INET);
  }
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
