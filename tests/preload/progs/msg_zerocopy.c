/* MSG_ZEROCOPY as kernel TCP has it: with SO_ZEROCOPY set (after connect,
 * or before it), a send with MSG_ZEROCOPY is followed by a completion on
 * the error queue (POLLERR, recvmsg(MSG_ERRQUEUE): SO_EE_ORIGIN_ZEROCOPY,
 * the range of sends it covers).  vsocket moves such connections to kernel
 * TCP (reason zerocopy), which alone queues them.
 * usage: msg_zerocopy */
#include "ptest.h"

#include <linux/errqueue.h>
#include <sys/uio.h>

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif

enum { kBytes = 65536 };

/* Sends kBytes with MSG_ZEROCOPY on c, reads them at s, then waits for
 * the completion of send number `id` on c's error queue. */
static void send_and_complete(int c, int s, unsigned id) {
  static unsigned char out[kBytes], in[kBytes];
  fill_pattern(out, kBytes, id);
  CHECK_EQ(send(c, out, kBytes, MSG_ZEROCOPY), kBytes);
  read_exact(s, in, kBytes);
  CHECK(check_pattern(in, kBytes, id));
  struct pollfd p = {c, 0, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  CHECK(p.revents & POLLERR);
  char control[128];
  struct msghdr msg = {0};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  CHECK(recvmsg(c, &msg, MSG_ERRQUEUE) == 0);
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  CHECK(cm != NULL);
  CHECK((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
        (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR));
  struct sock_extended_err* ee = (struct sock_extended_err*)CMSG_DATA(cm);
  CHECK_EQ(ee->ee_errno, 0);
  CHECK_EQ(ee->ee_origin, SO_EE_ORIGIN_ZEROCOPY);
  CHECK_EQ(ee->ee_info, id);
  CHECK_EQ(ee->ee_data, id);
  /* Nothing more queued. */
  CHECK_EQ(recvmsg(c, &msg, MSG_ERRQUEUE | MSG_DONTWAIT), -1);
  CHECK_EQ(errno, EAGAIN);
}

int main(void) {
  ptest_start(30);
  int one = 1;
  /* Set after connect. */
  int c, s;
  make_pair(&c, &s);
  CHECK(setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0);
  send_and_complete(c, s, 0);
  send_and_complete(c, s, 1);
  close(c);
  close(s);
  /* Set before connect. */
  int l = listen_on("127.0.0.1");
  int c2 = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(c2 >= 0);
  CHECK(setsockopt(c2, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0);
  struct sockaddr_storage a;
  socklen_t alen = make_addr("127.0.0.1", port_of(l), &a);
  CHECK(connect(c2, (struct sockaddr*)&a, alen) == 0);
  int s2 = accept(l, NULL, NULL);
  CHECK(s2 >= 0);
  send_and_complete(c2, s2, 0);
  close(c2);
  close(s2);
  close(l);
  printf("PASS\n");
  return 0;
}
