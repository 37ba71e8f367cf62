/* Many concurrent connections under a low descriptor limit.
 *   many_clients server PORT N   accepts N connections (poll loop), echoes
 *                                each, and exits once all N have closed
 *                                (a reset counts as closed: "reset K")
 *   many_clients client PORT N [BYTES [IDLE_MS]]
 *                                opens N connections and holds them all,
 *                                sends 64 distinct bytes on each (or BYTES,
 *                                in 64 KiB rounds), checks each echo, reports
 *                                the descriptors and the shared memory
 *                                (/proc/meminfo Shmem, both ends) each
 *                                connection added (and again after IDLE_MS
                                with nothing sent), then closes them
 * With MANY_CLIENTS_PAUSE_MS set, the client prints "opened N" once all N
 * are open and waits that long before sending (a test acts meanwhile).
 * Run it under `ulimit -n 256` with N = 200: the kernel gives it every
 * descriptor it needs, and so must vsocket.  Both ends use 127.0.0.1, or
 * $PTEST_IP (the RDMA guest's own address).  Prints PASS. */
#include "ptest.h"

#include <arpa/inet.h>
#include <netinet/in.h>

enum { kMax = 16384, kMessage = 64 };

static void fill(unsigned char* buf, int index) {
  for (int i = 0; i < kMessage; ++i) buf[i] = (unsigned char)(index * 31 + i);
}

static int run_server(int port, int n) {
  int l = listen_on_port(test_ip(), port, 512);
  static struct pollfd fds[kMax + 1];
  int count = 0, accepted = 0, closed = 0, resets = 0;
  fds[0].fd = l;
  fds[0].events = POLLIN;
  while (closed < n) {
    int r = poll(fds, (nfds_t)(count + 1), 20000);
    CHECK(r > 0);
    if ((fds[0].revents & POLLIN) && accepted < n) {
      int c = accept(l, NULL, NULL);
      CHECK(c >= 0);
      fds[1 + count].fd = c;
      fds[1 + count].events = POLLIN;
      ++count;
      ++accepted;
    }
    for (int i = 1; i <= count; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got < 0 && errno == ECONNRESET) ++resets;  /* a killed client */
      else CHECK(got >= 0);
      if (got <= 0) {
        CHECK(close(fds[i].fd) == 0);
        fds[i].fd = -1;
        ++closed;
        continue;
      }
      write_all(fds[i].fd, buf, (size_t)got);
    }
  }
  CHECK(close(l) == 0);
  if (resets > 0) printf("reset %d\n", resets);
  printf("served %d\nPASS\n", accepted);
  return 0;
}

static void exchange(int fd, int index, size_t bytes) {
  static unsigned char want[65536], got[65536];
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < sizeof(want) ? bytes - done : sizeof(want);
    for (size_t i = 0; i < n; ++i) want[i] = (unsigned char)(index * 31 + done + i);
    write_all(fd, want, n);
    read_exact(fd, got, n);
    CHECK(memcmp(want, got, n) == 0);
    done += n;
  }
}

static int run_client(int port, int n, size_t bytes, int idle_ms) {
  static int fds[kMax];
  long shmem_before = shmem_kib();
  int fds_before = open_descriptors();
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  CHECK(inet_pton(AF_INET, test_ip(), &a.sin_addr) == 1);
  for (int i = 0; i < n; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fds[i] >= 0);
    CHECK(connect(fds[i], (struct sockaddr*)&a, sizeof(a)) == 0);
  }
  if (getenv("MANY_CLIENTS_PAUSE_MS") != NULL) {
    printf("opened %d\n", n);
    fflush(stdout);
    sleep_ms(atoi(getenv("MANY_CLIENTS_PAUSE_MS")));
  }
  if (bytes > kMessage) {
    for (int i = 0; i < n; ++i) exchange(fds[i], i, bytes);
  } else {
    unsigned char want[kMessage], got[kMessage];
    for (int i = 0; i < n; ++i) {
      fill(want, i);
      write_all(fds[i], want, kMessage);
    }
    for (int i = 0; i < n; ++i) {
      fill(want, i);
      read_exact(fds[i], got, kMessage);
      CHECK(memcmp(want, got, kMessage) == 0);
    }
  }
  printf("checked %zu bytes each way on each of %d connections\n",
         bytes > kMessage ? bytes : (size_t)kMessage, n);
  printf("per connection: %.2f descriptors here, %.1f KiB shared memory (both ends)\n",
         (double)(open_descriptors() - fds_before) / n,
         (double)(shmem_kib() - shmem_before) / n);
  if (idle_ms > 0) {
    fflush(stdout);  /* seen while it idles */
    sleep_ms(idle_ms);
    printf("after %d ms idle: %.1f KiB shared memory per connection\n", idle_ms,
           (double)(shmem_kib() - shmem_before) / n);
  }
  for (int i = 0; i < n; ++i) CHECK(close(fds[i]) == 0);
  printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  CHECK(argc >= 4 && argc <= 6);
  int port = atoi(argv[2]), n = atoi(argv[3]);
  size_t bytes = argc >= 5 ? (size_t)atol(argv[4]) : kMessage;
  int idle_ms = argc == 6 ? atoi(argv[5]) : 0;
  CHECK(n > 0 && n <= kMax);
  if (!strcmp(argv[1], "server")) return run_server(port, n);
  if (!strcmp(argv[1], "client")) return run_client(port, n, bytes, idle_ms);
  return 2;
}
