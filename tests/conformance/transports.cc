#include "transports.h"

#include <string>

namespace conformance {
namespace {

// VSOCKET_CONFORMANCE_HOST / _DEVICE: the built backends' names, comma
// separated, from their vsocket_backend() declarations (CONFORMANCE HOST or
// DEVICE; tests/conformance/CMakeLists.txt).  Each runs with
// VSOCKET_TRANSPORT=<name>, beside the kernel reference.
std::vector<Transport> WithBackends(std::vector<Transport> out, const char* names) {
  std::string list = names;
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    // Leaked: gtest keeps the parameters until the process ends.
    const char* name = (new std::string(list.substr(at, comma - at)))->c_str();
    out.push_back({name, &VsocketApi(), name});
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<Transport> HostTransports() {
  return WithBackends({{"kernel", &KernelApi(), nullptr}, {"tcp", &VsocketApi(), "tcp"}},
                      VSOCKET_CONFORMANCE_HOST);
}

std::vector<Transport> DeviceTransports() {
  return WithBackends({{"kernel", &KernelApi(), nullptr}}, VSOCKET_CONFORMANCE_DEVICE);
}

}  // namespace conformance
