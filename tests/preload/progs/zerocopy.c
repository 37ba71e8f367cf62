/* sendfile and splice with a connection at one end; the kernel's errors
 * where the kernel refuses. usage: zerocopy TMPDIR */
#include "ptest.h"

#include <sys/sendfile.h>

#define FILE_BYTES (3u << 20)

struct sink {
  int fd;
  size_t want;
  int ok;
};

static void* reader(void* arg) {
  struct sink* k = arg;
  unsigned char* buf = malloc(k->want);
  CHECK(buf != NULL);
  read_exact(k->fd, buf, k->want);
  k->ok = check_pattern(buf, k->want, 0);
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  ptest_start(30);
  CHECK(argc == 2);
  char path[512];
  snprintf(path, sizeof(path), "%s/zerocopy.bin", argv[1]);
  int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(f >= 0);
  unsigned char* data = malloc(FILE_BYTES);
  CHECK(data != NULL);
  fill_pattern(data, FILE_BYTES, 0);
  write_all(f, data, FILE_BYTES);
  int c, s;
  make_pair(&c, &s);

  /* sendfile with an offset: the file position does not move. */
  CHECK_EQ(lseek(f, 0, SEEK_SET), 0);
  struct sink k = {s, FILE_BYTES, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reader, &k) == 0);
  off_t off = 0;
  CHECK_EQ(sendfile(c, f, &off, FILE_BYTES), FILE_BYTES);
  CHECK_EQ(off, FILE_BYTES);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(k.ok);
  CHECK_EQ(lseek(f, 0, SEEK_CUR), 0);

  /* sendfile from the file position, past the end: short count. */
  CHECK_EQ(lseek(f, FILE_BYTES - 1000, SEEK_SET), FILE_BYTES - 1000);
  CHECK_EQ(sendfile(c, f, NULL, 5000), 1000);
  CHECK_EQ(lseek(f, 0, SEEK_CUR), FILE_BYTES);
  unsigned char buf[8192];
  read_exact(s, buf, 1000);
  CHECK(check_pattern(buf, 1000, FILE_BYTES - 1000));
  CHECK_EQ(sendfile(c, f, NULL, 10), 0);  /* at EOF */

  /* socket -> pipe and pipe -> socket with splice */
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK_EQ(write(c, data, 1000), 1000);
  CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
  CHECK_EQ(splice(s, NULL, p[1], NULL, 4096, 0), 1000);
  CHECK_EQ(read(p[0], buf, sizeof(buf)), 1000);
  CHECK(check_pattern(buf, 1000, 0));
  CHECK_EQ(write(p[1], data, 500), 500);
  CHECK_EQ(splice(p[0], NULL, c, NULL, 500, 0), 500);
  read_exact(s, buf, 500);
  CHECK(check_pattern(buf, 500, 0));
  /* Only what the pipe could take is consumed from the socket. */
  int pipe_size = fcntl(p[1], F_GETPIPE_SZ);
  CHECK(pipe_size > 0);
  set_nonblocking(c, 1);
  size_t queued = 0;
  while (queued < (size_t)pipe_size + 10000) {
    ssize_t n = write(c, data + queued, (size_t)pipe_size + 10000 - queued);
    CHECK(n > 0);
    queued += (size_t)n;
  }
  set_nonblocking(c, 0);
  size_t moved = 0, drained = 0;
  while (drained < queued) {
    ssize_t n = moved < queued
                    ? splice(s, NULL, p[1], NULL, queued - moved, SPLICE_F_NONBLOCK)
                    : -1;
    if (n < 0) {
      if (moved < queued) CHECK_EQ(errno, EAGAIN);  /* the pipe is full */
      ssize_t r = read(p[0], buf, sizeof(buf));
      CHECK(r > 0);
      CHECK(check_pattern(buf, (size_t)r, drained));
      drained += (size_t)r;
      continue;
    }
    CHECK(n > 0);
    moved += (size_t)n;
  }
  CHECK_EQ(moved, queued);
  CHECK_EQ(drained, queued);

  /* The kernel's refusals. */
  CHECK_ERR(splice(s, NULL, c, NULL, 10, 0), EINVAL);       /* no pipe */
  loff_t loff = 0;
  CHECK_ERR(splice(s, &loff, p[1], NULL, 10, 0), EINVAL);   /* offset on socket */
  CHECK_ERR(splice(p[0], NULL, c, &loff, 10, 0), EINVAL);
  CHECK_ERR(splice(f, NULL, c, NULL, 10, 0), EINVAL);       /* file -> socket */
  CHECK_ERR(sendfile(c, s, NULL, 10), EINVAL);              /* socket -> socket */
  /* An empty socket: EAGAIN only if the socket is non-blocking
   * (SPLICE_F_NONBLOCK is about the pipe). */
  set_nonblocking(s, 1);
  CHECK_ERR(splice(s, NULL, p[1], NULL, 10, 0), EAGAIN);
  CHECK_ERR(splice(s, NULL, p[1], NULL, 10, SPLICE_F_NONBLOCK), EAGAIN);
  set_nonblocking(s, 0);
  /* An empty pipe with SPLICE_F_NONBLOCK: EAGAIN. */
  CHECK_ERR(splice(p[0], NULL, c, NULL, 10, SPLICE_F_NONBLOCK), EAGAIN);
  close(p[0]);
  close(p[1]);
  close(c);
  close(s);
  close(f);
  unlink(path);
  free(data);
  printf("PASS\n");
  return 0;
}
