/* Connections and listeners passed to another process in SCM_RIGHTS
 * messages work there as on kernel TCP: the receiver's descriptor is a
 * connected stream socket (SO_TYPE, getpeername), reads the bytes that
 * arrived before it was passed, and its writes reach the peer, whether the
 * sender closes its copy or keeps and uses it.  A passed listener accepts
 * in the receiver.  Each case runs with a receiver that is a forked child
 * (preloaded like us) and with one that exec'd this program without
 * LD_PRELOAD (a plain process).
 * usage: pass_descriptors            (the test)
 *        pass_descriptors worker FD  (the receiver, FD its Unix socket) */
#include <sys/wait.h>

#include "ptest.h"

/* Sends `fd` and the command byte `cmd` over the Unix socket `unix_fd`;
 * with `unpadded`, msg_controllen is CMSG_LEN(sizeof(int)) rather than
 * CMSG_SPACE (vsftpd sends so; the kernel takes it). */
static void send_fd_as(int unix_fd, int fd, char cmd, int unpadded) {
  /* Room for a second header after the first message: the kernel reads
   * only msg_controllen bytes, so what lies past them must not matter.
   * The bytes there say "a header 16 TiB long". */
  union {
    char buf[CMSG_SPACE(sizeof(int)) + sizeof(struct cmsghdr)];
    struct cmsghdr align;
  } space;
  char* control = space.buf;
  memset(control, 0, sizeof(space.buf));
  size_t bogus_len = (size_t)1 << 44;
  memcpy(control + CMSG_SPACE(sizeof(int)), &bogus_len, sizeof(bogus_len));
  struct iovec iov = {&cmd, 1};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = CMSG_SPACE(sizeof(int));
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (unpadded) m.msg_controllen = CMSG_LEN(sizeof(int));
  CHECK_EQ(sendmsg(unix_fd, &m, 0), 1);
}

static void send_fd(int unix_fd, int fd, char cmd) { send_fd_as(unix_fd, fd, cmd, 0); }

/* Receives a descriptor and its command byte; 0 at the end. */
static char recv_fd(int unix_fd, int* fd) {
  char cmd = 0;
  char control[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&cmd, 1};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(unix_fd, &m, MSG_CMSG_CLOEXEC);
  CHECK(n >= 0);
  if (n == 0) return 0;
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  CHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
  memcpy(fd, CMSG_DATA(c), sizeof(int));
  return cmd;
}

static void check_connected_stream(int fd) {
  int type = 0;
  socklen_t len = sizeof(type);
  CHECK(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0);
  CHECK_EQ(type, SOCK_STREAM);
  struct sockaddr_storage peer;
  len = sizeof(peer);
  CHECK(getpeername(fd, (struct sockaddr*)&peer, &len) == 0);
  int error = -1;
  len = sizeof(error);
  CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0);
  CHECK_EQ(error, 0);
}

/* The receiver: for each descriptor, what its command byte says; then a
 * reply byte on the Unix socket. */
static int worker(int unix_fd) {
  for (;;) {
    int fd = -1;
    char cmd = recv_fd(unix_fd, &fd);
    if (cmd == 0) return 0;
    char buf[16];
    if (cmd == 'c' || cmd == 'k') {
      /* 'c': "hello" is waiting; answer "world" and close.
       * 'k': the same, but the sender keeps its copy and writes after us. */
      check_connected_stream(fd);
      read_exact(fd, buf, 5);
      CHECK(memcmp(buf, "hello", 5) == 0);
      write_all(fd, "world", 5);
      CHECK(close(fd) == 0);
    } else if (cmd == 'l') {
      /* A listener: say it arrived, accept one client, echo its 5 bytes,
       * close both. */
      write_all(unix_fd, "r", 1);
      int s = accept(fd, NULL, NULL);
      CHECK(s >= 0);
      check_connected_stream(s);
      read_exact(s, buf, 5);
      write_all(s, buf, 5);
      CHECK(close(s) == 0);
      CHECK(close(fd) == 0);
    }
    write_all(unix_fd, "d", 1);
  }
}

/* A receiver: a forked child, or this program exec'd without LD_PRELOAD. */
static pid_t start_worker(int plain, int* unix_fd) {
  int sp[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(sp[0]);
    if (!plain) exit(worker(sp[1])); /* exit(): its stats line too */
    char fd_text[16];
    snprintf(fd_text, sizeof(fd_text), "%d", sp[1]);
    unsetenv("LD_PRELOAD");
    char* argv[] = {"pass_descriptors", "worker", fd_text, NULL};
    extern char** environ;
    execve("/proc/self/exe", argv, environ);
    _exit(127);
  }
  close(sp[1]);
  *unix_fd = sp[0];
  return pid;
}

static void wait_for_byte(int unix_fd, char want) {
  char d;
  read_exact(unix_fd, &d, 1);
  CHECK_EQ(d, want);
}

static void wait_done(int unix_fd) { wait_for_byte(unix_fd, 'd'); }

static void expect_eof(int fd) {
  char b;
  CHECK(wait_for(fd, POLLIN, 5000) & POLLIN);
  CHECK_EQ(read(fd, &b, 1), 0);
}

static void run_cases(int plain) {
  int w;
  pid_t pid = start_worker(plain, &w);
  int l = listen_on("127.0.0.1");
  int port = port_of(l);
  char buf[16];

  /* The sender passes a connection with unread bytes and closes it. */
  int c = connect_to("127.0.0.1", port);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  write_all(c, "x", 1); /* the connection is in use before it moves */
  read_exact(s, buf, 1);
  write_all(c, "hello", 5);
  send_fd(w, s, 'c');
  CHECK(close(s) == 0);
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "world", 5) == 0);
  wait_done(w);
  expect_eof(c);
  CHECK(close(c) == 0);

  /* The sender keeps its copy and writes after the receiver did. */
  c = connect_to("127.0.0.1", port);
  s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  write_all(c, "hello", 5);
  send_fd(w, s, 'k');
  wait_done(w);
  write_all(s, "again", 5);
  read_exact(c, buf, 10);
  CHECK(memcmp(buf, "worldagain", 10) == 0);
  write_all(c, "more", 4); /* still readable at the sender's copy */
  read_exact(s, buf, 4);
  CHECK(memcmp(buf, "more", 4) == 0);
  CHECK(close(s) == 0);
  expect_eof(c);
  CHECK(close(c) == 0);

  /* The connecting side passes its connection at once, before it wrote or
   * read (vsftpd's port 20 helper), in an unpadded message, and closes it. */
  c = connect_to("127.0.0.1", port);
  send_fd_as(w, c, 'c', /*unpadded=*/1);
  CHECK(close(c) == 0);
  s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  write_all(s, "hello", 5);
  read_exact(s, buf, 5);
  CHECK(memcmp(buf, "world", 5) == 0);
  wait_done(w);
  expect_eof(s);
  CHECK(close(s) == 0);

  /* A listener, kept by the sender: the receiver accepts on it. */
  send_fd(w, l, 'l');
  wait_for_byte(w, 'r');
  c = connect_to("127.0.0.1", port);
  write_all(c, "echo!", 5);
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "echo!", 5) == 0);
  wait_done(w);
  expect_eof(c);
  CHECK(close(c) == 0);

  /* A listener the sender closes after passing it. */
  int l2 = listen_on("127.0.0.1");
  int port2 = port_of(l2);
  send_fd(w, l2, 'l');
  CHECK(close(l2) == 0);
  wait_for_byte(w, 'r');
  c = connect_to("127.0.0.1", port2);
  write_all(c, "echo2", 5);
  read_exact(c, buf, 5);
  CHECK(memcmp(buf, "echo2", 5) == 0);
  wait_done(w);
  expect_eof(c);
  CHECK(close(c) == 0);

  CHECK(close(l) == 0);
  CHECK(close(w) == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char** argv) {
  ptest_start(30);
  if (argc == 3 && strcmp(argv[1], "worker") == 0) return worker(atoi(argv[2]));
  signal(SIGPIPE, SIG_IGN);
  run_cases(/*plain=*/0);
  run_cases(/*plain=*/1);
  printf("PASS\n");
  return 0;
}
