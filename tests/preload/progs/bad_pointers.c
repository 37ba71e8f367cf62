/* Bad pointers under the interposer, as kernel TCP answers them: EFAULT
 * from send/recv/writev/readv/sendmsg/recvmsg, nothing sent or consumed.
 * The fault guard vsocket installs for its ring copies stays out of sight:
 * sigaction() shows the program's own SIGSEGV action (SIG_DFL until it
 * sets one), and a handler the program installs later still gets the
 * program's own faults, while a bad pointer given to a socket call is
 * still EFAULT.
 * usage: bad_pointers */
#include <setjmp.h>
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
  char two[2];
  CHECK_EQ(recv(s, two, 2, MSG_WAITALL), 2);
  CHECK(memcmp(two, "ok", 2) == 0);
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
