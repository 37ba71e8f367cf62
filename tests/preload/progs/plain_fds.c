/* Descriptors that are not TCP sockets are passed through untouched:
 * pipes, files, eventfds, AF_UNIX socketpairs and UDP sockets, including
 * their numbers being reused after a connection was closed. */
#include "ptest.h"

#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>

static void pipes_and_files(const char* dir) {
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK_EQ(write(p[1], "pipe data", 9), 9);
  char buf[64];
  CHECK_EQ(read(p[0], buf, sizeof(buf)), 9);
  CHECK(memcmp(buf, "pipe data", 9) == 0);
  struct iovec iov[2] = {{"ab", 2}, {"cd", 2}};
  CHECK_EQ(writev(p[1], iov, 2), 4);
  CHECK_EQ(read(p[0], buf, sizeof(buf)), 4);
  CHECK(memcmp(buf, "abcd", 4) == 0);
  set_nonblocking(p[0], 1);
  CHECK_ERR(read(p[0], buf, sizeof(buf)), EAGAIN);
  CHECK_EQ(close(p[1]), 0);
  CHECK_EQ(read(p[0], buf, sizeof(buf)), 0);
  CHECK_EQ(close(p[0]), 0);

  char path[512];
  snprintf(path, sizeof(path), "%s/plain_fds.txt", dir);
  int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(f >= 0);
  CHECK_EQ(write(f, "0123456789", 10), 10);
  CHECK_EQ(lseek(f, 2, SEEK_SET), 2);
  CHECK_EQ(read(f, buf, 3), 3);
  CHECK(memcmp(buf, "234", 3) == 0);
  CHECK_EQ(pread(f, buf, 4, 6), 4);
  CHECK(memcmp(buf, "6789", 4) == 0);
  struct iovec rv[2] = {{buf, 1}, {buf + 1, 1}};
  CHECK_EQ(readv(f, rv, 2), 2);
  CHECK(memcmp(buf, "56", 2) == 0);
  int f2 = dup(f);
  CHECK(f2 >= 0);
  CHECK_EQ(close(f), 0);
  CHECK_EQ(lseek(f2, 0, SEEK_SET), 0);
  CHECK_EQ(read(f2, buf, 2), 2);
  CHECK(memcmp(buf, "01", 2) == 0);
  /* sendfile file -> pipe stays the kernel's. */
  int q[2];
  CHECK(pipe(q) == 0);
  off_t off = 5;
  CHECK_EQ(sendfile(q[1], f2, &off, 3), 3);
  CHECK_EQ(off, 8);
  CHECK_EQ(read(q[0], buf, sizeof(buf)), 3);
  CHECK(memcmp(buf, "567", 3) == 0);
  close(q[0]);
  close(q[1]);
  CHECK_EQ(close(f2), 0);
  CHECK_ERR(read(f2, buf, 1), EBADF);
  CHECK_ERR(close(f2), EBADF);
  unlink(path);
}

static void other_sockets(void) {
  int u[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0);
  char buf[64];
  CHECK_EQ(send(u[0], "unix", 4, 0), 4);
  CHECK_EQ(recv(u[1], buf, sizeof(buf), 0), 4);
  CHECK_EQ(write(u[1], "back", 4), 4);
  CHECK_EQ(read(u[0], buf, sizeof(buf)), 4);
  close(u[0]);
  close(u[1]);

  int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(a >= 0 && b >= 0);
  struct sockaddr_storage addr;
  socklen_t len = make_addr("127.0.0.1", 0, &addr);
  CHECK(bind(b, (struct sockaddr*)&addr, len) == 0);
  len = make_addr("127.0.0.1", port_of(b), &addr);
  CHECK_EQ(sendto(a, "udp", 3, 0, (struct sockaddr*)&addr, len), 3);
  struct sockaddr_storage from;
  socklen_t from_len = sizeof(from);
  CHECK_EQ(recvfrom(b, buf, sizeof(buf), 0, (struct sockaddr*)&from, &from_len), 3);
  CHECK_EQ(ntohs(((struct sockaddr_in*)&from)->sin_port), port_of(a));
  close(a);
  close(b);

  int e = eventfd(0, 0);
  uint64_t v = 5;
  CHECK_EQ(write(e, &v, 8), 8);
  v = 0;
  CHECK_EQ(read(e, &v, 8), 8);
  CHECK_EQ(v, 5);
  close(e);
}

int main(int argc, char** argv) {
  ptest_start(30);
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  pipes_and_files(dir);
  other_sockets();
  /* A connection's numbers, once closed, are reused by plain descriptors
   * that must not be mistaken for the old connection. */
  for (int i = 0; i < 20; ++i) {
    int c, s;
    make_pair(&c, &s);
    CHECK_EQ(write(c, "x", 1), 1);
    char b;
    CHECK_EQ(read(s, &b, 1), 1);
    close(c);
    close(s);
    pipes_and_files(dir);
  }
  /* fdopen() + fclose() on a connection: libc closes the number itself;
   * a file that reuses it must be a plain file again. */
  for (int i = 0; i < 3; ++i) {
    int c, s;
    make_pair(&c, &s);
    FILE* stream = fdopen(c, "r+");
    CHECK(stream != NULL);
    CHECK(fclose(stream) == 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/reuse.txt", dir);
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(f >= 0);
    if (f != c) {  /* put the file at the connection's old number */
      CHECK_EQ(dup2(f, c), c);
      close(f);
      f = c;
    }
    CHECK_EQ(write(f, "file", 4), 4);
    CHECK_EQ(pread(f, path, 4, 0), 4);
    CHECK(memcmp(path, "file", 4) == 0);
    CHECK_EQ(lseek(f, 0, SEEK_SET), 0);
    char b[8];
    CHECK_EQ(read(f, b, sizeof(b)), 4);
    close(f);
    CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
    CHECK_EQ(read(s, b, sizeof(b)), 0);  /* the peer saw the close */
    close(s);
  }
  printf("PASS\n");
  return 0;
}
