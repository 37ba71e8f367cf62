/* Blocking I/O through every data call on one connection: read/write,
 * send/recv, readv/writev, sendmsg/recvmsg, sendto/recvfrom,
 * sendmmsg/recvmmsg, a transfer much larger than the ring, FIONREAD,
 * half-close, names and options. */
#include "ptest.h"

#include <sys/ioctl.h>
#include <sys/uio.h>

#define BIG (8u << 20)

static int g_big_fd;

static void* big_writer(void* arg) {
  (void)arg;
  unsigned char* buf = malloc(BIG);
  CHECK(buf != NULL);
  fill_pattern(buf, BIG, 7);
  write_all(g_big_fd, buf, BIG);
  free(buf);
  return NULL;
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  char buf[256];

  /* write / read */
  CHECK_EQ(write(c, "hello", 5), 5);
  CHECK_EQ(read(s, buf, sizeof(buf)), 5);
  CHECK(memcmp(buf, "hello", 5) == 0);

  /* send / recv, the other way */
  CHECK_EQ(send(s, "world!", 6, 0), 6);
  CHECK_EQ(recv(c, buf, sizeof(buf), 0), 6);
  CHECK(memcmp(buf, "world!", 6) == 0);

  /* sendto / recvfrom: a connected stream socket reports no source
   * address (*addrlen becomes 0, the buffer is left alone). */
  CHECK_EQ(sendto(c, "from", 4, 0, NULL, 0), 4);
  struct sockaddr_storage src;
  memset(&src, 0xab, sizeof(src));
  socklen_t srclen = sizeof(src);
  CHECK_EQ(recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr*)&src, &srclen), 4);
  CHECK_EQ(srclen, 0);
  CHECK_EQ(((unsigned char*)&src)[0], 0xab);

  /* writev / readv across iovec boundaries */
  struct iovec out[3] = {{"ab", 2}, {"cde", 3}, {"fghij", 5}};
  CHECK_EQ(writev(c, out, 3), 10);
  char r1[4], r2[6];
  struct iovec in[2] = {{r1, 4}, {r2, 6}};
  CHECK_EQ(readv(s, in, 2), 10);
  CHECK(memcmp(r1, "abcd", 4) == 0 && memcmp(r2, "efghij", 6) == 0);

  /* sendmsg / recvmsg */
  struct msghdr m = {0};
  struct iovec mi[2] = {{"12", 2}, {"345", 3}};
  m.msg_iov = mi;
  m.msg_iovlen = 2;
  CHECK_EQ(sendmsg(s, &m, 0), 5);
  memset(&m, 0, sizeof(m));
  struct iovec ri = {buf, sizeof(buf)};
  m.msg_iov = &ri;
  m.msg_iovlen = 1;
  CHECK_EQ(recvmsg(c, &m, 0), 5);
  CHECK(memcmp(buf, "12345", 5) == 0);
  CHECK_EQ(m.msg_flags & MSG_TRUNC, 0);

  /* sendto ignores the address on a connected stream; recvfrom on a TCP
   * socket reports no source address (length 0, buffer untouched). */
  struct sockaddr_storage junk;
  socklen_t junk_len = make_addr("127.0.0.1", 9, &junk);
  CHECK_EQ(sendto(c, "xyz", 3, 0, (struct sockaddr*)&junk, junk_len), 3);
  struct sockaddr_storage from;
  memset(&from, 0xab, sizeof(from));
  socklen_t from_len = sizeof(from);
  CHECK_EQ(recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr*)&from, &from_len), 3);
  CHECK(memcmp(buf, "xyz", 3) == 0);
  CHECK_EQ(from_len, 0);
  CHECK_EQ(((unsigned char*)&from)[0], 0xab);
  CHECK_EQ(send(c, "uvw", 3, 0), 3);
  CHECK_EQ(recvfrom(s, buf, sizeof(buf), 0, NULL, NULL), 3);
  CHECK(memcmp(buf, "uvw", 3) == 0);

  /* sendmmsg / recvmmsg */
  struct mmsghdr mm[3];
  struct iovec mmi[3] = {{"one", 3}, {"two", 3}, {"three", 5}};
  memset(mm, 0, sizeof(mm));
  for (int i = 0; i < 3; ++i) {
    mm[i].msg_hdr.msg_iov = &mmi[i];
    mm[i].msg_hdr.msg_iovlen = 1;
  }
  CHECK_EQ(sendmmsg(c, mm, 3, 0), 3);
  CHECK_EQ(mm[0].msg_len, 3);
  CHECK_EQ(mm[2].msg_len, 5);
  char rb[2][16];
  struct iovec rmi[2] = {{rb[0], 16}, {rb[1], 16}};
  struct mmsghdr rm[2];
  memset(rm, 0, sizeof(rm));
  for (int i = 0; i < 2; ++i) {
    rm[i].msg_hdr.msg_iov = &rmi[i];
    rm[i].msg_hdr.msg_iovlen = 1;
  }
  /* A stream has no message boundaries: the first entry takes all 11
   * bytes; MSG_WAITFORONE makes the second entry non-blocking. */
  CHECK_EQ(recvmmsg(s, rm, 2, MSG_WAITFORONE, NULL), 1);
  CHECK_EQ(rm[0].msg_len, 11);
  CHECK(memcmp(rb[0], "onetwothree", 11) == 0);

  /* FIONREAD */
  CHECK_EQ(write(c, buf, 100), 100);
  CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
  int avail = -1;
  CHECK(ioctl(s, FIONREAD, &avail) == 0);
  CHECK_EQ(avail, 100);
  CHECK_EQ(read(s, buf, 100), 100);
  CHECK(ioctl(s, FIONREAD, &avail) == 0);
  CHECK_EQ(avail, 0);

  /* 8 MiB, eight times the default ring, with a concurrent writer */
  pthread_t t;
  g_big_fd = c;
  CHECK(pthread_create(&t, NULL, big_writer, NULL) == 0);
  unsigned char* big = malloc(BIG);
  CHECK(big != NULL);
  read_exact(s, big, BIG);
  CHECK(check_pattern(big, BIG, 7));
  free(big);
  CHECK(pthread_join(t, NULL) == 0);

  /* names and options */
  struct sockaddr_storage a1, a2;
  socklen_t l1 = sizeof(a1), l2 = sizeof(a2);
  CHECK(getsockname(s, (struct sockaddr*)&a1, &l1) == 0);
  CHECK(getpeername(c, (struct sockaddr*)&a2, &l2) == 0);
  CHECK_EQ(l1, l2);
  CHECK(memcmp(&a1, &a2, l1) == 0);
  int v = 0;
  socklen_t vl = sizeof(v);
  CHECK(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &vl) == 0);
  CHECK_EQ(v, SOCK_STREAM);
  CHECK(getsockopt(c, SOL_SOCKET, SO_DOMAIN, &v, &vl) == 0);
  CHECK_EQ(v, AF_INET);
  int one = 1;
  CHECK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
  v = 0;
  CHECK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0);
  CHECK_EQ(v, 1);
  CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl) == 0);
  CHECK_EQ(v, 0);

  /* half-close: EOF one way, data still flows the other way */
  CHECK_EQ(write(c, "last", 4), 4);
  CHECK(shutdown(c, SHUT_WR) == 0);
  CHECK_EQ(read(s, buf, sizeof(buf)), 4);
  CHECK_EQ(read(s, buf, sizeof(buf)), 0);
  CHECK_EQ(read(s, buf, sizeof(buf)), 0);
  CHECK_EQ(write(s, "reply", 5), 5);
  CHECK_EQ(read(c, buf, sizeof(buf)), 5);
  CHECK(memcmp(buf, "reply", 5) == 0);
  CHECK(close(s) == 0);
  CHECK_EQ(read(c, buf, sizeof(buf)), 0);
  CHECK(close(c) == 0);
  printf("PASS\n");
  return 0;
}
