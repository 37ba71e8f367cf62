/* IPv6 loopback and IPv4-mapped addresses.  Three connections:
 *  [::1] -> [::1];  127.0.0.1 (AF_INET) -> dual-stack [::];
 *  ::ffff:127.0.0.1 (AF_INET6) -> 127.0.0.1 (AF_INET listener). */
#include "ptest.h"

static void exchange(int c, int s) {
  char buf[64];
  CHECK_EQ(write(c, "v6?", 3), 3);
  CHECK_EQ(read(s, buf, sizeof(buf)), 3);
  CHECK(memcmp(buf, "v6?", 3) == 0);
  CHECK_EQ(write(s, "yes", 3), 3);
  CHECK_EQ(read(c, buf, sizeof(buf)), 3);
  CHECK(memcmp(buf, "yes", 3) == 0);
}

static void addr_text(int fd, int peer, char* out, size_t size, int* family) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (peer) CHECK(getpeername(fd, (struct sockaddr*)&ss, &len) == 0);
  else CHECK(getsockname(fd, (struct sockaddr*)&ss, &len) == 0);
  *family = ss.ss_family;
  if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &((struct sockaddr_in6*)&ss)->sin6_addr, out, (socklen_t)size);
  else
    inet_ntop(AF_INET, &((struct sockaddr_in*)&ss)->sin_addr, out, (socklen_t)size);
}

int main(void) {
  ptest_start(30);
  char text[64];
  int family;
  int c, s;

  make_pair_on("::1", "::1", &c, &s);
  exchange(c, s);
  addr_text(s, 1, text, sizeof(text), &family);
  CHECK_EQ(family, AF_INET6);
  CHECK(strcmp(text, "::1") == 0);
  addr_text(c, 1, text, sizeof(text), &family);
  CHECK(strcmp(text, "::1") == 0);
  close(c);
  close(s);

  /* Dual-stack listener: an IPv4 client appears as ::ffff:127.0.0.1. */
  struct sockaddr_storage any;
  socklen_t len = make_addr("::", 0, &any);
  int l = socket(AF_INET6, SOCK_STREAM, 0);
  CHECK(l >= 0);
  int off = 0;
  CHECK(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == 0);
  CHECK(bind(l, (struct sockaddr*)&any, len) == 0);
  CHECK(listen(l, 8) == 0);
  c = connect_to("127.0.0.1", port_of(l));
  struct sockaddr_storage peer;
  socklen_t plen = sizeof(peer);
  s = accept(l, (struct sockaddr*)&peer, &plen);
  CHECK(s >= 0);
  CHECK_EQ(peer.ss_family, AF_INET6);
  CHECK(IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6*)&peer)->sin6_addr));
  addr_text(s, 1, text, sizeof(text), &family);
  printf("mapped_peer=%s\n", text);
  CHECK(strcmp(text, "::ffff:127.0.0.1") == 0);
  addr_text(c, 1, text, sizeof(text), &family);
  CHECK_EQ(family, AF_INET);
  exchange(c, s);
  close(c);
  close(s);
  close(l);

  /* An AF_INET6 socket connecting to a mapped address reaches an AF_INET
   * listener. */
  l = listen_on("127.0.0.1");
  c = connect_to("::ffff:127.0.0.1", port_of(l));
  s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  addr_text(c, 1, text, sizeof(text), &family);
  CHECK_EQ(family, AF_INET6);
  CHECK(strcmp(text, "::ffff:127.0.0.1") == 0);
  exchange(c, s);
  close(c);
  close(s);
  close(l);
  printf("PASS\n");
  return 0;
}
