/* preadv2/pwritev2 and preadv/pwritev on a connected socket, as the kernel
 * answers them: offset -1 reads and writes the stream (RWF_NOWAIT: as
 * MSG_DONTWAIT), any other offset is ESPIPE (EINVAL if negative), flags a
 * socket refuses are EOPNOTSUPP, a bad count EINVAL; nothing is consumed
 * by the refused calls.
 * usage: vector_io */
#define _GNU_SOURCE
#include <sys/uio.h>

#include "ptest.h"

static ssize_t read2(int fd, char* buf, size_t len, off_t offset, int flags) {
  struct iovec iov = {buf, len};
  return preadv2(fd, &iov, 1, offset, flags);
}

static ssize_t write2(int fd, const char* buf, size_t len, off_t offset, int flags) {
  struct iovec iov = {(void*)buf, len};
  return pwritev2(fd, &iov, 1, offset, flags);
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  char buf[16];
  struct iovec iov = {buf, sizeof(buf)};

  /* Offset -1: the stream. */
  CHECK_EQ(write2(c, "abc", 3, -1, 0), 3);
  CHECK(wait_for(s, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read2(s, buf, sizeof(buf), -1, 0), 3);
  CHECK(memcmp(buf, "abc", 3) == 0);

  /* RWF_NOWAIT on an empty socket: EAGAIN, without blocking. */
  CHECK_EQ(read2(s, buf, sizeof(buf), -1, RWF_NOWAIT), -1);
  CHECK_EQ(errno, EAGAIN);
  CHECK_EQ(write2(c, "de", 2, -1, RWF_NOWAIT | RWF_DSYNC), 2);
  CHECK(wait_for(s, POLLIN, 5000) & POLLIN);

  /* Refused: nothing consumed. */
  CHECK_EQ(read2(s, buf, sizeof(buf), 0, 0), -1);
  CHECK_EQ(errno, ESPIPE);
  CHECK_EQ(read2(s, buf, sizeof(buf), -2, 0), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(read2(s, buf, sizeof(buf), -1, 0x40000000), -1);
  CHECK_EQ(errno, EOPNOTSUPP);
  /* A negative count on purpose: the kernel's EINVAL. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
  CHECK_EQ(preadv2(s, &iov, -1, -1, 0), -1);
#pragma GCC diagnostic pop
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(preadv(s, &iov, 1, 0), -1);
  CHECK_EQ(errno, ESPIPE);
  CHECK_EQ(preadv64v2(s, &iov, 1, 7, 0), -1);
  CHECK_EQ(errno, ESPIPE);
  CHECK_EQ(write2(c, "x", 1, 5, 0), -1);
  CHECK_EQ(errno, ESPIPE);
  CHECK_EQ(pwritev(c, &iov, 1, 0), -1);
  CHECK_EQ(errno, ESPIPE);

  CHECK_EQ(read2(s, buf, sizeof(buf), -1, RWF_NOWAIT | RWF_HIPRI), 2);
  CHECK(memcmp(buf, "de", 2) == 0);
  /* The 64 names, both ways. */
  struct iovec out = {"fgh", 3};
  CHECK_EQ(pwritev64v2(c, &out, 1, -1, 0), 3);
  CHECK(wait_for(s, POLLIN, 5000) & POLLIN);
  CHECK_EQ(preadv64v2(s, &iov, 1, -1, 0), 3);
  CHECK(memcmp(buf, "fgh", 3) == 0);
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
