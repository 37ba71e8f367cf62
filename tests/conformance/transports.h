// The conformance suite's parameters: which API both ends use and which
// VSOCKET_TRANSPORT policy their processes run with.
#ifndef VSOCKET_TESTS_CONFORMANCE_TRANSPORTS_H_
#define VSOCKET_TESTS_CONFORMANCE_TRANSPORTS_H_

#include <ostream>
#include <vector>

#include "socket_api.h"

namespace conformance {

using vsocket_test::KernelApi;
using vsocket_test::SocketApi;
using vsocket_test::VsocketApi;

struct Transport {
  const char* name;        // gtest parameter name: kernel, tcp, or the backend's
  const SocketApi* api;
  // VSOCKET_TRANSPORT in both ends' processes, and what
  // vsocket_transport_name() must then say on both ends; nullptr for the
  // kernel reference (plain libc, no vsocket).
  const char* policy;
};

// kernel, tcp, then every built backend declared CONFORMANCE HOST
// (cmake/backends.cmake: shm, toe): the host suite.
std::vector<Transport> HostTransports();
// kernel, then every built backend declared CONFORMANCE DEVICE (rdma): the
// suite where their device is (tests/rdma, inside the Soft-RoCE guest).
std::vector<Transport> DeviceTransports();

inline std::ostream& operator<<(std::ostream& os, const Transport& t) {
  return os << t.name;
}

}  // namespace conformance

#endif  // VSOCKET_TESTS_CONFORMANCE_TRANSPORTS_H_
