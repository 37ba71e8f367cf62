/* Non-blocking connect: to a local listener it completes at once (or is in
 * progress); POLLOUT and SO_ERROR == 0 follow; a refused connect reports
 * ECONNREFUSED either directly or through SO_ERROR. */
#include "ptest.h"

static int nb_connect(const char* ip, int port, int* rc_out) {
  struct sockaddr_storage addr;
  socklen_t len = make_addr(ip, port, &addr);
  int fd = socket(addr.ss_family, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  set_nonblocking(fd, 1);
  int rc = connect(fd, (struct sockaddr*)&addr, len);
  *rc_out = rc == 0 ? 0 : errno;
  return fd;
}

int main(void) {
  ptest_start(30);
  int l = listen_on("127.0.0.1");
  int port = port_of(l);
  char buf[64];

  for (int i = 0; i < 3; ++i) {
    int err;
    int c = nb_connect("127.0.0.1", port, &err);
    printf("connect_result=%s\n", err == 0 ? "0" : strerror(err));
    CHECK(err == 0 || err == EINPROGRESS);
    CHECK(wait_for(c, POLLOUT, 2000) & POLLOUT);
    int so_error = -1;
    socklen_t len = sizeof(so_error);
    CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0);
    CHECK_EQ(so_error, 0);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    CHECK(getpeername(c, (struct sockaddr*)&peer, &plen) == 0);
    CHECK_EQ(ntohs(((struct sockaddr_in*)&peer)->sin_port), port);
    /* Another connect on the connected socket.  After EINPROGRESS the
     * kernel reports the completion once (0), then EISCONN. */
    struct sockaddr_storage addr;
    socklen_t alen = make_addr("127.0.0.1", port, &addr);
    if (err == EINPROGRESS) CHECK_EQ(connect(c, (struct sockaddr*)&addr, alen), 0);
    CHECK_ERR(connect(c, (struct sockaddr*)&addr, alen), EISCONN);

    CHECK(wait_for(l, POLLIN, 2000) & POLLIN);
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    CHECK_EQ(write(c, "ping", 4), 4);
    CHECK(wait_for(s, POLLIN, 2000) & POLLIN);
    CHECK_EQ(read(s, buf, sizeof(buf)), 4);
    CHECK_EQ(write(s, "pong!", 5), 5);
    CHECK(wait_for(c, POLLIN, 2000) & POLLIN);
    CHECK_EQ(read(c, buf, sizeof(buf)), 5);
    CHECK(memcmp(buf, "pong!", 5) == 0);
    close(c);
    close(s);
  }

  /* A port nobody listens on. */
  int gone = listen_on("127.0.0.1");
  int gone_port = port_of(gone);
  close(gone);
  int err;
  int c = nb_connect("127.0.0.1", gone_port, &err);
  printf("refused_result=%s\n", strerror(err));
  if (err == EINPROGRESS) {
    CHECK(wait_for(c, POLLOUT, 2000) != 0);
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0);
    CHECK_EQ(so_error, ECONNREFUSED);
  } else {
    CHECK_EQ(err, ECONNREFUSED);
  }
  close(c);
  /* Blocking connect to it: ECONNREFUSED directly. */
  struct sockaddr_storage addr;
  socklen_t alen = make_addr("127.0.0.1", gone_port, &addr);
  c = socket(AF_INET, SOCK_STREAM, 0);
  CHECK_ERR(connect(c, (struct sockaddr*)&addr, alen), ECONNREFUSED);
  close(c);
  close(l);
  printf("PASS\n");
  return 0;
}
