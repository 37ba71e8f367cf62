/* Holds connections open and busy for vsocket-stat to look at
 * (live_stat_test.cc).
 *   live_pair server PORT...          listens on 127.0.0.1:PORT each, prints
 *                                     READY, echoes one connection per port
 *                                     until every client hung up
 *   live_pair client SECONDS PORT...  connects to each port, prints
 *                                     CONNECTED, then every 10 ms sends 100
 *                                     bytes on each and reads them back, for
 *                                     SECONDS; prints PASS */
#include "ptest.h"

#define MAX_PORTS 8

static int Listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0);
  CHECK(listen(fd, 4) == 0);
  return fd;
}

static int Server(int nports, char** ports) {
  int listeners[MAX_PORTS], conns[MAX_PORTS];
  for (int i = 0; i < nports; ++i) listeners[i] = Listen(atoi(ports[i]));
  printf("READY\n");
  fflush(stdout);
  for (int i = 0; i < nports; ++i) {
    conns[i] = accept(listeners[i], NULL, NULL);
    CHECK(conns[i] >= 0);
  }
  int open = nports;
  char buf[4096];
  while (open > 0) {
    struct pollfd pfd[MAX_PORTS];
    for (int i = 0; i < nports; ++i) pfd[i] = (struct pollfd){conns[i], POLLIN, 0};
    CHECK(poll(pfd, (nfds_t)nports, -1) > 0);
    for (int i = 0; i < nports; ++i) {
      if (conns[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = recv(conns[i], buf, sizeof(buf), 0);
      if (n <= 0) {
        close(conns[i]);
        conns[i] = -1;
        --open;
        continue;
      }
      CHECK(send(conns[i], buf, (size_t)n, 0) == n);
    }
  }
  printf("PASS\n");
  return 0;
}

static int Client(double seconds, int nports, char** ports) {
  int fds[MAX_PORTS];
  for (int i = 0; i < nports; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fds[i] >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(ports[i]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fds[i], (struct sockaddr*)&a, sizeof(a)) == 0);
  }
  printf("CONNECTED\n");
  fflush(stdout);
  char msg[100], back[100];
  memset(msg, 'x', sizeof(msg));
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    for (int i = 0; i < nports; ++i) {
      CHECK(send(fds[i], msg, sizeof(msg), 0) == (ssize_t)sizeof(msg));
      CHECK(recv(fds[i], back, sizeof(back), MSG_WAITALL) == (ssize_t)sizeof(back));
    }
    usleep(10000);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  for (int i = 0; i < nports; ++i) close(fds[i]);
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  alarm(60);
  if (argc >= 3 && argc - 2 <= MAX_PORTS && !strcmp(argv[1], "server"))
    return Server(argc - 2, argv + 2);
  if (argc >= 4 && argc - 3 <= MAX_PORTS && !strcmp(argv[1], "client"))
    return Client(atof(argv[2]), argc - 3, argv + 3);
  fprintf(stderr, "usage: live_pair server PORT... | client SECONDS PORT...\n");
  return 2;
}
