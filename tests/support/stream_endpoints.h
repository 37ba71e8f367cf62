// Listening and connecting in the ends of a forked pair (forked_pair.h),
// through a SocketApi so that one call serves kernel TCP and vsocket alike.
// Every step is CHECKed (child_check.h): call these only in a forked child.
#ifndef VSOCKET_TESTS_SUPPORT_STREAM_ENDPOINTS_H_
#define VSOCKET_TESTS_SUPPORT_STREAM_ENDPOINTS_H_

#include <netinet/in.h>

#include <cstdint>

#include "socket_api.h"

namespace vsocket_test {

// $VSOCKET_RDMA_SELF_IP (the Soft-RoCE guest's rxe address); "" outside
// the guest.
const char* RdmaGuestIp();

// RdmaGuestIp(), else "127.0.0.1": where a test that may run on RDMA
// listens.
const char* SelfIp();

// ip:port; Fail()s on a malformed `ip`.
sockaddr_in Ipv4(const char* ip, int port);

struct ListenOptions {
  int backlog = 16;
  bool reuse_addr = false;  // SO_REUSEADDR before bind()
};

// A listening socket bound to `addr` (port 0: an ephemeral one); stores
// the bound port in *port.
int ListenOn(const SocketApi& api, sockaddr_in addr, int* port,
             ListenOptions options = {});

// A socket connected to `addr`.  If `elapsed_us` is given, stores how long
// the connect() call alone took.
int ConnectTo(const SocketApi& api, sockaddr_in addr,
              int64_t* elapsed_us = nullptr);

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_STREAM_ENDPOINTS_H_
