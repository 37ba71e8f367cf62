#include "transports.h"

#include <set>
#include <string>
#include <utility>

namespace conformance {
namespace {

// A name that lives as long as the process (gtest keeps the parameters, and
// calls HostTransports() once per test suite): interned in a set that a
// static holds, so it stays reachable and LeakSanitizer does not report it.
const char* Interned(std::string name) {
  static auto* names = new std::set<std::string>();
  return names->insert(std::move(name)).first->c_str();
}

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
    const char* name = Interned(list.substr(at, comma - at));
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
