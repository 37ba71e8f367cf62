#include "vsocket/path_selection.h"

#include <mutex>

#include "vsocket/config.h"
#include "vsocket/log.h"
#include "vsocket/provider_registry.h"
#include "vsocket/tcp_transport.h"

namespace vsocket {
namespace {

// The providers the policy lets path selection ask, in priority order.
struct Allowed {
  std::vector<TransportProvider*> providers;
  bool forced = false;  // VSOCKET_TRANSPORT named the one provider
  // The reason when `providers` is empty.
  FallbackReason none = FallbackReason::kDisabledByConfig;
};

const Allowed& AllowedProviders() {
  static const Allowed* allowed = [] {
    auto* a = new Allowed();
    const Config& config = GetConfig();
    switch (config.policy) {
      case TransportPolicy::kAuto:
        a->providers = Providers();
        break;
      case TransportPolicy::kTcp:
        break;
      case TransportPolicy::kNamed:
        if (TransportProvider* p = ProviderNamed(config.transport.c_str())) {
          a->providers.push_back(p);
          a->forced = true;
        } else {
          std::string have;
          for (TransportProvider* q : Providers()) have += std::string(" ") + q->name();
          VSOCKET_LOG(kWarn, "VSOCKET_TRANSPORT=%s: this build has no such transport "
                      "(it has tcp%s); every connection uses kernel TCP",
                      config.transport.c_str(), have.c_str());
          a->none = FallbackReason::kTransportUnavailable;
        }
        break;
    }
    return a;
  }();
  return *allowed;
}

// The slot of `p` in a ListenerAttachments (its registry position).
size_t SlotOf(const TransportProvider* p) {
  const auto& all = Providers();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == p) return i;
  }
  return all.size();
}

}  // namespace

FallbackReason PrepareOffer(int fd, const struct sockaddr* addr, socklen_t len,
                            std::unique_ptr<PendingConnection>* pending) {
  const Allowed& allowed = AllowedProviders();
  if (allowed.providers.empty()) return allowed.none;
  FallbackReason first = FallbackReason::kNone;
  for (TransportProvider* p : allowed.providers) {
    Decline d = p->Offer(fd, addr, len, allowed.forced, pending);
    if (d.reason == FallbackReason::kNone && *pending) return FallbackReason::kNone;
    if (d.applies) return d.reason;
    if (first == FallbackReason::kNone) first = d.reason;
  }
  return first;
}

std::unique_ptr<Transport> CompleteOffer(
    int fd, std::unique_ptr<PendingConnection> pending, FallbackReason reason) {
  if (pending) {
    FallbackReason why = FallbackReason::kNone;
    std::unique_ptr<Transport> t = pending->Complete(fd, &why);
    if (t) return t;
    if (reason == FallbackReason::kNone) reason = why;
  }
  return std::make_unique<TcpTransport>(fd, reason);
}

void AttachListeners(int listen_fd, bool kernel_listening,
                     ListenerAttachments* set) {
  const Allowed& allowed = AllowedProviders();
  set->resize(Providers().size());
  for (TransportProvider* p : allowed.providers) {
    size_t slot = SlotOf(p);
    if (slot >= set->size() || (*set)[slot]) continue;
    (*set)[slot] = p->AttachListener(listen_fd, kernel_listening);
  }
}

std::unique_ptr<Transport> ClaimAccepted(const ListenerAttachments& set,
                                         int accepted_fd) {
  FallbackReason first = FallbackReason::kNone;
  FallbackReason kept = FallbackReason::kNone;
  for (const auto& attachment : set) {
    if (!attachment) continue;
    Decline d;
    std::unique_ptr<Transport> t = attachment->Claim(accepted_fd, &d);
    if (t) return t;
    if (d.applies) {
      kept = d.reason;
      break;
    }
    if (first == FallbackReason::kNone) first = d.reason;
  }
  if (kept == FallbackReason::kNone) kept = first;
  if (kept == FallbackReason::kNone) kept = AllowedProviders().none;
  return std::make_unique<TcpTransport>(accepted_fd, kept);
}

}  // namespace vsocket
