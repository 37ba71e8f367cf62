/* A connection inherited through posix_spawn (file actions put it on the
 * child's stdin and stdout), system() and popen(): libc runs exec where no
 * interposer sees it, yet the new program (/bin/sh) must read and write
 * the connection as on kernel TCP, including bytes that arrived before
 * the spawn.  And vfork() followed by exec in the child.
 * usage: spawn_inherit */
#include "ptest.h" /* first: it defines _GNU_SOURCE (close_range) */

#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

static void expect_line(int c, const char* want) {
  char buf[64];
  size_t len = strlen(want);
  read_exact(c, buf, len);
  buf[len] = 0;
  if (strcmp(buf, want) != 0) {
    fprintf(stderr, "FAIL got '%s' want '%s'\n", buf, want);
    exit(1);
  }
}

int main(void) {
  ptest_start(30);
  signal(SIGPIPE, SIG_IGN);
  char cmd[128];

  /* posix_spawn, the connection on 0 and 1 by file actions (close-on-exec
   * itself, as a careful server keeps it). */
  int c, s;
  make_pair(&c, &s);
  CHECK(fcntl(s, F_SETFD, FD_CLOEXEC) == 0);
  write_all(c, "x", 1); /* the connection is in use before the spawn */
  char b;
  read_exact(s, &b, 1);
  write_all(c, "hello\n", 6); /* waits, unread, across the spawn */
  posix_spawn_file_actions_t fa;
  CHECK(posix_spawn_file_actions_init(&fa) == 0);
  CHECK(posix_spawn_file_actions_adddup2(&fa, s, 0) == 0);
  CHECK(posix_spawn_file_actions_adddup2(&fa, s, 1) == 0);
  char* argv[] = {"sh", "-c", "read line; echo \"got $line\"", NULL};
  pid_t pid;
  CHECK(posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  expect_line(c, "got hello\n");
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  write_all(s, "parent\n", 7); /* the parent's own number still works */
  expect_line(c, "parent\n");
  CHECK(close(s) == 0);
  CHECK(wait_for(c, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(c, &b, 1), 0);
  CHECK(close(c) == 0);

  /* system(): the shell writes to the inherited number. */
  make_pair(&c, &s);
  write_all(c, "x", 1);
  read_exact(s, &b, 1);
  snprintf(cmd, sizeof(cmd), "printf 'from system\\n' >&%d", s);
  CHECK_EQ(system(cmd), 0);
  expect_line(c, "from system\n");
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);

  /* popen(): the same, with a pipe beside it. */
  make_pair(&c, &s);
  write_all(c, "x", 1);
  read_exact(s, &b, 1);
  snprintf(cmd, sizeof(cmd), "printf 'from popen\\n' >&%d; echo done", s);
  FILE* f = popen(cmd, "r");
  CHECK(f != NULL);
  char line[32];
  CHECK(fgets(line, sizeof(line), f) != NULL);
  CHECK(strcmp(line, "done\n") == 0);
  CHECK(pclose(f) == 0);
  expect_line(c, "from popen\n");
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);

  /* A forked child holds the connection while its parent's system() moves
   * it: the child's copy follows, reads what the parent sends on, and its
   * close() closes its number once (it used to close it twice: EBADF). */
  make_pair(&c, &s);
  int sync_pipe[2];
  CHECK(pipe(sync_pipe) == 0);
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    CHECK(read(sync_pipe[0], &b, 1) == 1); /* the parent has moved */
    expect_line(s, "after the move\n");
    CHECK(close(s) == 0);
    CHECK(close(c) == 0);
    _exit(0);
  }
  CHECK_EQ(system("true"), 0);
  write_all(c, "after the move\n", 15);
  CHECK(write(sync_pipe[1], "m", 1) == 1);
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(close(sync_pipe[0]) == 0 && close(sync_pipe[1]) == 0);
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);

  /* vfork() + exec: the child dup2()s a close-on-exec connection onto
   * its stdin and stdout, as a shell or a server's helper does, with a
   * byte waiting unread across the vfork. */
  make_pair(&c, &s);
  CHECK(fcntl(s, F_SETFD, FD_CLOEXEC) == 0);
  write_all(c, "x", 1);
  read_exact(s, &b, 1);
  write_all(c, "vforked\n", 8);
  pid = vfork();
  if (pid == 0) {
    if (dup2(s, 0) != 0 || dup2(s, 1) != 1) _exit(126);
    execl("/bin/sh", "sh", "-c", "read line; echo \"got $line\"", (char*)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  expect_line(c, "got vforked\n");
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  write_all(s, "parent\n", 7);
  expect_line(c, "parent\n");
  CHECK(close(s) == 0);
  CHECK(close(c) == 0);

  /* A vfork child that dup2()s, closes and close_range()s every
   * descriptor before its exec, as Python's subprocess does, shares its
   * parent's memory but not its descriptor table: the parent's listener
   * and connection must stay as they were.  (The child's close_range used
   * to drop them from the parent's tables: the listener's clients then
   * waited for a claim that never came.) */
  int l = listen_on("127.0.0.1");
  make_pair(&c, &s);
  pid = vfork();
  if (pid == 0) {
    if (dup2(s, 0) != 0 || close(s) != 0) _exit(126);
    close_range(3, ~0U, 0);
    execl("/bin/true", "true", (char*)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  write_all(c, "still here\n", 11);
  expect_line(s, "still here\n");
  int64_t start = now_ms();
  int c2 = connect_to("127.0.0.1", port_of(l));
  int s2 = accept(l, NULL, NULL);
  CHECK(s2 >= 0);
  write_all(c2, "new\n", 4);
  expect_line(s2, "new\n");
  write_all(s2, "back\n", 5);
  expect_line(c2, "back\n");
  if (now_ms() - start > 1000) {
    fprintf(stderr, "FAIL the new connection took %lld ms\n", (long long)(now_ms() - start));
    exit(1);
  }
  CHECK(close(c2) == 0 && close(s2) == 0);
  CHECK(close(s) == 0 && close(c) == 0 && close(l) == 0);

  printf("PASS\n");
  return 0;
}
