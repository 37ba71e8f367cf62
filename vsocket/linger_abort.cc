#include "vsocket/linger_abort.h"

#include <sys/socket.h>

#include "base/real_libc.h"

namespace vsocket {

bool LingerAbortsClose(int tcp_fd) {
  if (tcp_fd < 0) return false;
  struct linger l = {0, 0};
  socklen_t len = sizeof(l);
  return sys::getsockopt(tcp_fd, SOL_SOCKET, SO_LINGER, &l, &len) == 0 &&
         l.l_onoff != 0 && l.l_linger == 0;
}

}  // namespace vsocket
