/* vsocket-echo-server: echoes every byte back, on vsocket's explicit API.
 *
 *   vsocket-echo-server [-n CONNECTIONS] PORT
 *
 * Listens on 127.0.0.1:PORT (0: a free port), prints "port N" on standard
 * output once it listens, then serves CONNECTIONS connections (default 1)
 * one after the other, each until the client shuts down its side, and
 * exits 0.  For each it reports on standard error which path the
 * connection took (vsocket_transport_name) and why (vsocket_fallback_reason).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vsocket/vsocket.h>

static int fail(const char* what) {
  fprintf(stderr, "vsocket-echo-server: %s: %s\n", what, strerror(errno));
  return 1;
}

/* Sends all of buf; 0, or -1 with errno. */
static int send_all(int fd, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t n = vsocket_send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Echoes until end of stream; 0, or -1 with errno. */
static int echo(int fd) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = vsocket_recv(fd, buf, sizeof buf, 0);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (send_all(fd, buf, (size_t)n) != 0) return -1;
  }
}

int main(int argc, char** argv) {
  int connections = 1, opt;
  while ((opt = getopt(argc, argv, "n:")) != -1) {
    if (opt == 'n' && atoi(optarg) > 0) {
      connections = atoi(optarg);
    } else {
      fprintf(stderr, "usage: vsocket-echo-server [-n CONNECTIONS] PORT\n");
      return 2;
    }
  }
  if (optind + 1 != argc) {
    fprintf(stderr, "usage: vsocket-echo-server [-n CONNECTIONS] PORT\n");
    return 2;
  }
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)atoi(argv[optind]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  int listener = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return fail("socket");
  int one = 1;
  vsocket_setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (vsocket_bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0) return fail("bind");
  if (vsocket_listen(listener, 16) != 0) return fail("listen");
  socklen_t len = sizeof addr;
  if (vsocket_getsockname(listener, (struct sockaddr*)&addr, &len) != 0)
    return fail("getsockname");
  printf("port %u\n", (unsigned)ntohs(addr.sin_port));
  fflush(stdout);

  for (int i = 0; i < connections; ++i) {
    int fd = vsocket_accept(listener, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR) { --i; continue; }
      return fail("accept");
    }
    const char* reason = vsocket_fallback_reason(fd);
    fprintf(stderr, "vsocket-echo-server: connection %d on %s%s%s\n", i + 1,
            vsocket_transport_name(fd), reason && *reason ? ", reason " : "",
            reason ? reason : "");
    if (echo(fd) != 0) return fail("echo");
    vsocket_close(fd);
  }
  vsocket_close(listener);
  return 0;
}
