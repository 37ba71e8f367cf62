#include "control_channel.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "child_check.h"

namespace vsocket_test {

void ControlEnd::Send(int64_t value) {
  ssize_t n;
  do n = write(fd, &value, sizeof(value)); while (n < 0 && errno == EINTR);
  CHECK(n == sizeof(value), "ctl write");
}

int64_t ControlEnd::Recv() {
  int64_t value = -1;
  ssize_t n;
  do n = read(fd, &value, sizeof(value)); while (n < 0 && errno == EINTR);
  CHECK(n == sizeof(value), "ctl read: the other end went away");
  return value;
}

bool ControlPair::Open() {
  return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0;
}

}  // namespace vsocket_test
