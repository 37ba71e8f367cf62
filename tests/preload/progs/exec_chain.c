/* exec_chain: one connection handed over across exec again and again, for
 * the kill-at-exec loop (exec_kill_test.cc).
 *   exec_chain sink
 *       listen on 127.0.0.1 (ephemeral port), print "port N", accept one
 *       connection (or none within 3 s), read it to EOF or ECONNRESET
 *       checking every byte against the ptest.h pattern, then print
 *       "got BYTES end=eof|reset|none ms=T" (T: CLOCK_MONOTONIC ms when the
 *       end was seen) and exit 0; 1 on a wrong byte or another error.
 *   exec_chain source PORT TOTAL STEP
 *       connect, then send STEP bytes of the pattern and re-exec itself with
 *       the connection ("exec_chain cont FD SENT TOTAL STEP"), until TOTAL
 *       bytes are sent; then close.  It waits 20 ms after connecting, so
 *       that the server has claimed the connection before the first exec.  Preloaded, every exec hands the
 *       shared-memory connection over to the new image. */
#include "ptest.h"

static char self[4096];

static int sink(void) {
  int l = listen_on("127.0.0.1");
  printf("port %d\n", port_of(l));
  fflush(stdout);
  if (!(wait_for(l, POLLIN, 3000) & POLLIN)) {
    printf("got 0 end=none ms=%lld\n", (long long)now_ms());
    return 0;
  }
  int fd = accept(l, NULL, NULL);
  CHECK(fd >= 0);
  static unsigned char buf[65536];
  uint64_t got = 0;
  const char* end = "eof";
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ECONNRESET) {
      end = "reset";
      break;
    }
    CHECK(n > 0);
    if (!check_pattern(buf, (size_t)n, got)) {
      fprintf(stderr, "FAIL wrong byte within [%llu, %llu)\n", (unsigned long long)got,
              (unsigned long long)(got + n));
      return 1;
    }
    got += (uint64_t)n;
  }
  printf("got %llu end=%s ms=%lld\n", (unsigned long long)got, end, (long long)now_ms());
  close(fd);
  return 0;
}

static int source(int fd, uint64_t sent, uint64_t total, uint64_t step) {
  static unsigned char buf[65536];
  uint64_t stop = sent + step < total ? sent + step : total;
  while (sent < stop) {
    size_t n = stop - sent < sizeof(buf) ? (size_t)(stop - sent) : sizeof(buf);
    fill_pattern(buf, n, sent);
    write_all(fd, buf, n);
    sent += n;
  }
  if (sent == total) {
    CHECK(close(fd) == 0);
    return 0;
  }
  char fd_text[16], sent_text[32], total_text[32], step_text[32];
  snprintf(fd_text, sizeof(fd_text), "%d", fd);
  snprintf(sent_text, sizeof(sent_text), "%llu", (unsigned long long)sent);
  snprintf(total_text, sizeof(total_text), "%llu", (unsigned long long)total);
  snprintf(step_text, sizeof(step_text), "%llu", (unsigned long long)step);
  char* argv[] = {self, "cont", fd_text, sent_text, total_text, step_text, NULL};
  execv(self, argv);
  CHECK(!"execv");
  return 1;
}

int main(int argc, char** argv) {
  ptest_start(30);
  CHECK(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
  if (argc == 2 && !strcmp(argv[1], "sink")) return sink();
  if (argc == 5 && !strcmp(argv[1], "source")) {
    int fd = connect_to("127.0.0.1", atoi(argv[2]));
    /* Give the server time to accept: only a claimed connection is handed
     * over (an offer still unclaimed at exec goes to TCP). */
    sleep_ms(20);
    return source(fd, 0, strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0));
  }
  if (argc == 6 && !strcmp(argv[1], "cont")) {
    return source(atoi(argv[2]), strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
                  strtoull(argv[5], NULL, 0));
  }
  fprintf(stderr, "usage: exec_chain sink | source PORT TOTAL STEP\n");
  return 2;
}
