/* vsocket-echo-client: sends a pattern to vsocket-echo-server and checks
 * that every byte comes back, on vsocket's explicit API.
 *
 *   vsocket-echo-client [-b BYTES] [-e TRANSPORT] PORT
 *
 * Connects to 127.0.0.1:PORT, sends BYTES (default 4 MiB) in 64 KiB pieces,
 * reading each piece back before the next, and compares.  Prints the path
 * the connection took ("transport shm", plus the fallback reason when it is
 * not a fast path).  Exit status 0 only if every byte came back unchanged
 * and, with -e, the connection was on TRANSPORT (shm, rdma or tcp).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vsocket/vsocket.h>

enum { kPiece = 64 * 1024 };

static int fail(const char* what) {
  fprintf(stderr, "vsocket-echo-client: %s: %s\n", what, strerror(errno));
  return 1;
}

/* Byte i of the stream: not periodic in the piece size, so a piece that
 * comes back shifted, repeated or from the wrong offset does not compare
 * equal. */
static unsigned char pattern(unsigned long long i) {
  return (unsigned char)((i * 2654435761ull) >> 13 ^ i);
}

int main(int argc, char** argv) {
  unsigned long long total = 4ull << 20;
  const char* expect = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "b:e:")) != -1) {
    if (opt == 'b') {
      total = strtoull(optarg, NULL, 10);
    } else if (opt == 'e') {
      expect = optarg;
    } else {
      fprintf(stderr, "usage: vsocket-echo-client [-b BYTES] [-e TRANSPORT] PORT\n");
      return 2;
    }
  }
  if (optind + 1 != argc) {
    fprintf(stderr, "usage: vsocket-echo-client [-b BYTES] [-e TRANSPORT] PORT\n");
    return 2;
  }
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)atoi(argv[optind]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  int fd = vsocket_socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return fail("socket");
  if (vsocket_connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) return fail("connect");
  const char* transport = vsocket_transport_name(fd);
  const char* reason = vsocket_fallback_reason(fd);
  printf("transport %s%s%s\n", transport ? transport : "?",
         reason && *reason ? ", reason " : "", reason ? reason : "");

  static unsigned char out[kPiece], in[kPiece];
  for (unsigned long long sent = 0; sent < total;) {
    size_t len = total - sent < kPiece ? (size_t)(total - sent) : kPiece;
    for (size_t i = 0; i < len; ++i) out[i] = pattern(sent + i);
    for (size_t done = 0; done < len;) {
      ssize_t n = vsocket_send(fd, out + done, len - done, MSG_NOSIGNAL);
      if (n < 0 && errno != EINTR) return fail("send");
      if (n > 0) done += (size_t)n;
    }
    for (size_t got = 0; got < len;) {
      ssize_t n = vsocket_recv(fd, in + got, len - got, 0);
      if (n == 0) {
        fprintf(stderr, "vsocket-echo-client: end of stream after %llu of %llu bytes\n",
                sent + got, total);
        return 1;
      }
      if (n < 0 && errno != EINTR) return fail("recv");
      if (n > 0) got += (size_t)n;
    }
    if (memcmp(in, out, len) != 0) {
      size_t i = 0;
      while (in[i] == out[i]) ++i;
      fprintf(stderr, "vsocket-echo-client: byte %llu came back as %u, sent %u\n",
              sent + i, in[i], out[i]);
      return 1;
    }
    sent += len;
  }
  /* The server echoes until end of stream, then closes: read that. */
  if (vsocket_shutdown(fd, SHUT_WR) != 0) return fail("shutdown");
  char extra;
  ssize_t n = vsocket_recv(fd, &extra, 1, 0);
  if (n != 0) {
    fprintf(stderr, "vsocket-echo-client: %s after the echo\n",
            n > 0 ? "unexpected bytes" : strerror(errno));
    return 1;
  }
  vsocket_close(fd);
  printf("echoed %llu bytes\n", total);
  if (expect && (!transport || strcmp(expect, transport) != 0)) {
    fprintf(stderr, "vsocket-echo-client: the connection was on %s, not %s\n",
            transport ? transport : "?", expect);
    return 1;
  }
  return 0;
}
