/* An inetd-style server that re-execs itself per connection: the parent
 * accepts, forks, moves the connection to descriptor 7 (closing the
 * original) and execs its own binary, which echoes everything it reads from
 * descriptor 7 with blocking reads until end of stream.
 * usage: reexec_server PORT          the new image inherits the environment
 *        reexec_server PORT plain    ... without LD_PRELOAD (not preloaded)
 *        reexec_server --serve FD    (the re-exec'd image) */
#include "ptest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>

extern char** environ;

static int serve(int fd) {
  static char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    CHECK(n >= 0);
    if (n == 0) break;
    write_all(fd, buf, (size_t)n);
  }
  CHECK(close(fd) == 0);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "--serve")) return serve(atoi(argv[2]));
  CHECK(argc >= 2);
  int plain = argc >= 3 && !strcmp(argv[2], "plain");
  static char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(len > 0);
  self[len] = '\0';
  static char* env[512];
  int n = 0;
  for (char** e = environ; *e && n < 510; ++e) {
    if (!plain || strncmp(*e, "LD_PRELOAD=", 11) != 0) env[n++] = *e;
  }
  env[n] = NULL;

  int l = listen_on_port("127.0.0.1", atoi(argv[1]), 64);
  for (;;) {
    int c = accept(l, NULL, NULL);
    if (c < 0 && errno == EINTR) continue;
    CHECK(c >= 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      CHECK(close(l) == 0);
      if (c != 7) {
        CHECK_EQ(dup2(c, 7), 7);
        CHECK(close(c) == 0);
      }
      char* args[] = {self, "--serve", "7", NULL};
      execve(self, args, env);
      _exit(127);
    }
    CHECK(close(c) == 0);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
}
