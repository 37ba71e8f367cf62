/* Bad pointers under the interposer, as kernel TCP answers them: EFAULT
 * from send/recv/writev/readv/sendmsg/recvmsg, nothing sent or consumed;
 * EFAULT from the ioctls and getsockopts vsocket answers itself (FIONREAD,
 * FIONBIO, SO_ERROR, TCP_DEFER_ACCEPT on a listener) and from accept()
 * with a bad length pointer, and the lengths as the kernel has them.
 * The fault guard vsocket installs for its ring copies stays out of sight:
 * sigaction() shows the program's own SIGSEGV action (SIG_DFL until it
 * sets one), and a handler the program installs later still gets the
 * program's own faults, while a bad pointer given to a socket call is
 * still EFAULT.
 * usage: bad_pointers */
#include <netinet/tcp.h>
#include <setjmp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "ptest.h"

/* PROT_NONE and never unmapped: an unmapped address is the next one mmap
 * hands out, so a later mapping (a log buffer, a ring) would make it valid. */
static void* inaccessible_page(void) {
  void* page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED);
  return page;
}

/* Every call with a bad pointer fails with EFAULT; then "ok" goes through. */
static void bad_calls(int c, int s, void* gone) {
  CHECK_EQ(send(c, gone, 16, MSG_NOSIGNAL), -1);
  CHECK_EQ(errno, EFAULT);
  struct iovec bad = {gone, 16};
  CHECK_EQ(writev(c, &bad, 1), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(sendmsg(c, (struct msghdr*)gone, MSG_NOSIGNAL), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(write(c, "ok", 2), 2);
  CHECK(wait_for(s, POLLIN, 5000) & POLLIN);
  CHECK_EQ(recv(s, gone, 16, 0), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(read(s, gone, 16), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(readv(s, &bad, 1), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(recvmsg(s, (struct msghdr*)gone, 0), -1);
  CHECK_EQ(errno, EFAULT);
  int v = -1;
  CHECK_EQ(ioctl(s, FIONREAD, gone), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(ioctl(s, FIONREAD, &v), 0);
  CHECK_EQ(v, 2);
  CHECK_EQ(ioctl(s, FIONBIO, gone), -1);
  CHECK_EQ(errno, EFAULT);
  char two[2];
  CHECK_EQ(recv(s, two, 2, MSG_WAITALL), 2);
  CHECK(memcmp(two, "ok", 2) == 0);
  socklen_t len = sizeof(v);
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, gone, &len), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, (socklen_t*)gone), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, NULL), -1);
  CHECK_EQ(errno, EFAULT);
  len = (socklen_t)-1;
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), -1);
  CHECK_EQ(errno, EINVAL);
  /* A short length takes that many bytes, as the kernel gives them. */
  len = 2;
  v = -1;
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), 0);
  CHECK_EQ(len, 2);
  CHECK_EQ(v & 0xffff, 0);
  len = 0;
  CHECK_EQ(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), 0);
  CHECK_EQ(len, 0);
}

/* TCP_DEFER_ACCEPT read back from a listener (vsocket keeps it from the
 * kernel on a listener with fast paths, and answers getsockopt itself). */
static void bad_listener_calls(void* gone) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(l >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(bind(l, (struct sockaddr*)&a, sizeof(a)) == 0);
  CHECK(listen(l, 1) == 0);
  int seconds = 5;
  CHECK(setsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof(seconds)) == 0);
  int v = 0;
  socklen_t len = sizeof(v);
  CHECK_EQ(getsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, gone, &len), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(getsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, (socklen_t*)gone), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(getsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &len), 0);
  CHECK_EQ(len, sizeof(v));
  CHECK(v > 0); /* the kernel rounds it to retransmissions */
  /* accept() with a bad length pointer: EFAULT, and the kernel drops the
   * connection it took. */
  socklen_t alen = sizeof(a);
  CHECK(getsockname(l, (struct sockaddr*)&a, &alen) == 0);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(c, (struct sockaddr*)&a, sizeof(a)) == 0);
  CHECK_EQ(write(c, "x", 1), 1); /* TCP_DEFER_ACCEPT waits for data */
  struct sockaddr_in peer;
  CHECK_EQ(accept(l, (struct sockaddr*)&peer, (socklen_t*)gone), -1);
  CHECK_EQ(errno, EFAULT);
  close(c);
  close(l);
}

static sigjmp_buf g_back;
static volatile sig_atomic_t g_own_faults;
static void on_segv(int sig) {
  (void)sig;
  g_own_faults++;
  siglongjmp(g_back, 1);
}

int main(void) {
  ptest_start(30);
  int c, s;
  make_pair(&c, &s);
  struct sigaction q;
  CHECK(sigaction(SIGSEGV, NULL, &q) == 0);
  CHECK(q.sa_handler == SIG_DFL);
  CHECK(sigaction(SIGBUS, NULL, &q) == 0);
  CHECK(q.sa_handler == SIG_DFL);
  void* gone = inaccessible_page();
  bad_calls(c, s, gone);
  bad_listener_calls(gone);

  /* The program's own handler: its own faults reach it. */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_segv;
  CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
  CHECK(sigaction(SIGSEGV, NULL, &q) == 0);
  CHECK(q.sa_handler == on_segv);
  if (sigsetjmp(g_back, 1) == 0) *(volatile char*)gone = 1;
  CHECK_EQ(g_own_faults, 1);
  bad_calls(c, s, gone);
  CHECK_EQ(g_own_faults, 1);
  if (sigsetjmp(g_back, 1) == 0) *(volatile char*)gone = 2;
  CHECK_EQ(g_own_faults, 2);
  close(c);
  close(s);
  printf("PASS\n");
  return 0;
}
