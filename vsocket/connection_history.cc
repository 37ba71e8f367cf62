#include "vsocket/connection_history.h"
#include "base/after_fork.h"

#include <netinet/in.h>
#include <pthread.h>

#include <cstring>

#include "vsocket/config.h"

namespace vsocket {

bool MakeDestinationKey(const struct sockaddr* addr, socklen_t len,
                        DestinationKey* key) {
  *key = DestinationKey();
  if (!addr) return false;
  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(addr);
    key->bytes[0] = AF_INET;
    std::memcpy(&key->bytes[1], &in->sin_port, 2);
    std::memcpy(&key->bytes[3], &in->sin_addr, 4);
    return true;
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(addr);
    key->bytes[0] = AF_INET6;
    std::memcpy(&key->bytes[1], &in6->sin6_port, 2);
    std::memcpy(&key->bytes[3], &in6->sin6_addr, 16);
    return true;
  }
  return false;
}

size_t ConnectionHistory::Hash::operator()(const DestinationKey& k) const {
  // FNV-1a: 19 bytes, no need for more.
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : k.bytes) h = (h ^ b) * 1099511628211ull;
  return static_cast<size_t>(h);
}

ConnectionHistory::ConnectionHistory(uint32_t short_calls, uint32_t streak,
                                     size_t max_destinations)
    : short_calls_(short_calls),
      streak_(streak),
      max_destinations_(max_destinations) {}

bool ConnectionHistory::PredictsShort(const DestinationKey& key) {
  if (short_calls_ == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = short_in_a_row_.find(key);
  return it != short_in_a_row_.end() && it->second >= streak_;
}

void ConnectionHistory::Record(const DestinationKey& key, uint32_t data_calls) {
  if (short_calls_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (data_calls >= short_calls_) {
    short_in_a_row_.erase(key);
    return;
  }
  if (short_in_a_row_.size() >= max_destinations_ &&
      short_in_a_row_.find(key) == short_in_a_row_.end()) {
    short_in_a_row_.clear();
  }
  uint32_t& n = short_in_a_row_[key];
  if (n < streak_) ++n;
}

ConnectionHistory& ProcessConnectionHistory() {
  // Never destroyed: sockets close from atexit handlers too.
  static ConnectionHistory* history = [] {
    auto* h = new ConnectionHistory(GetConfig().short_calls, kShortStreak, 4096);
    ::vsocket::sys::AtFork([] { ProcessConnectionHistory().LockForFork(); },
                   [] { ProcessConnectionHistory().UnlockAfterFork(); },
                   [] { ProcessConnectionHistory().UnlockAfterFork(); });
    return h;
  }();
  return *history;
}

}  // namespace vsocket
