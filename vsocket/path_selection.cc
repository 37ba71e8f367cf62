#include "vsocket/path_selection.h"

#include <errno.h>

#include <atomic>
#include <mutex>

#include "base/real_libc.h"
#include "vsocket/config.h"
#include "vsocket/connection_history.h"
#include "vsocket/log.h"
#include "vsocket/provider_registry.h"
#include "vsocket/rules.h"
#include "vsocket/tcp_transport.h"

namespace vsocket {
namespace {

// The providers the policy lets path selection ask, in priority order.
struct Allowed {
  std::vector<TransportProvider*> providers;
  bool forced = false;  // the policy named the one provider
  // The reason when `providers` is empty.
  FallbackReason none = FallbackReason::kDisabledByConfig;
  uint64_t ring_bytes = 0;  // 0: VSOCKET_RING_SIZE
  uint32_t rule_line = 0;   // the rule that decided; 0: VSOCKET_TRANSPORT
};

// `policy` (and `name` for kNamed) as providers; `tcp_reason` for kTcp.
void Resolve(TransportPolicy policy, const std::string& name,
             FallbackReason tcp_reason, const char* source, Allowed* a) {
  switch (policy) {
    case TransportPolicy::kAuto:
      a->providers = Providers();
      break;
    case TransportPolicy::kTcp:
      a->none = tcp_reason;
      break;
    case TransportPolicy::kNamed:
      if (TransportProvider* p = ProviderNamed(name.c_str())) {
        a->providers.push_back(p);
        a->forced = true;
      } else {
        static std::once_flag warned;
        std::call_once(warned, [&] {
          std::string have;
          for (TransportProvider* q : Providers()) have += std::string(" ") + q->name();
          VSOCKET_LOG(kWarn, "%s names transport %s: this build has no such transport "
                      "(it has tcp%s); its connections use kernel TCP",
                      source, name.c_str(), have.c_str());
        });
        a->none = FallbackReason::kTransportUnavailable;
      }
      break;
  }
}

// What VSOCKET_TRANSPORT allows (the rules file aside).
const Allowed& EnvironmentAllowed() {
  static const Allowed* allowed = [] {
    auto* a = new Allowed();
    const Config& config = GetConfig();
    Resolve(config.policy, config.transport, FallbackReason::kDisabledByConfig,
            "VSOCKET_TRANSPORT", a);
    return a;
  }();
  return *allowed;
}

// The choice for one connection or listener: the first rule of the rules
// file that matches it, unless VSOCKET_TRANSPORT chose (a value other than
// auto wins over the file), else VSOCKET_TRANSPORT.
Allowed Decide(RuleRole role, int fd, const struct sockaddr* remote) {
  const Rules& rules = GetRules();
  if (rules.rules.empty() || GetConfig().policy != TransportPolicy::kAuto)
    return EnvironmentAllowed();
  struct sockaddr_storage local;
  socklen_t local_len = sizeof(local);
  auto* local_sa = reinterpret_cast<struct sockaddr*>(&local);
  if (sys::getsockname(fd, local_sa, &local_len) != 0) local_sa = nullptr;
  const Rule* rule = MatchRule(rules, role, ProgramName(), local_sa, remote);
  if (!rule) return EnvironmentAllowed();
  Allowed a;
  a.rule_line = rule->line;
  a.ring_bytes = rule->ring_bytes;
  Resolve(rule->policy, rule->transport, FallbackReason::kDisabledByRule,
          rules.file.c_str(), &a);
  return a;
}

// WithdrawFastPaths's reason; kNone while the fabrics may be used.
std::atomic<FallbackReason> g_withdrawn{FallbackReason::kNone};

FallbackReason Withdrawn() { return g_withdrawn.load(std::memory_order_acquire); }

// The slot of `p` in a ListenerAttachments (its registry position).
size_t SlotOf(const TransportProvider* p) {
  const auto& all = Providers();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == p) return i;
  }
  return all.size();
}

}  // namespace

void WithdrawFastPaths(FallbackReason reason) {
  FallbackReason none = FallbackReason::kNone;
  if (g_withdrawn.compare_exchange_strong(none, reason, std::memory_order_acq_rel))
    VSOCKET_LOG(kInfo, "new connections of this process use kernel TCP: %s",
                FallbackReasonName(reason));
}

FallbackReason PrepareOffer(int fd, const struct sockaddr* addr, socklen_t len,
                            std::unique_ptr<PendingConnection>* pending,
                            uint32_t* rule_line) {
  Allowed allowed = Decide(RuleRole::kClient, fd, addr);
  *rule_line = allowed.rule_line;
  if (allowed.providers.empty()) return allowed.none;
  if (FallbackReason withdrawn = Withdrawn(); withdrawn != FallbackReason::kNone)
    return withdrawn;
  // A policy that named the fabric is obeyed; auto weighs the setup.
  DestinationKey destination;
  if (!allowed.forced && MakeDestinationKey(addr, len, &destination) &&
      ProcessConnectionHistory().PredictsShort(destination)) {
    return FallbackReason::kShortLived;
  }
  OfferOptions options;
  options.forced = allowed.forced;
  options.ring_bytes = allowed.ring_bytes ? allowed.ring_bytes : GetConfig().ring_bytes;
  FallbackReason first = FallbackReason::kNone;
  for (TransportProvider* p : allowed.providers) {
    Decline d = p->Offer(fd, addr, len, options, pending);
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
                     ListenerAttachments* set, uint32_t* rule_line) {
  Allowed allowed = Decide(RuleRole::kServer, listen_fd, nullptr);
  *rule_line = allowed.rule_line;
  set->resize(Providers().size());
  if (Withdrawn() != FallbackReason::kNone) return;
  for (TransportProvider* p : allowed.providers) {
    size_t slot = SlotOf(p);
    if (slot >= set->size() || (*set)[slot]) continue;
    (*set)[slot] = p->AttachListener(listen_fd, kernel_listening);
  }
}

std::unique_ptr<Transport> ClaimAccepted(const ListenerAttachments& set,
                                         int accepted_fd, ConnectionEndpoints* ends,
                                         uint32_t rule_line) {
  if (FallbackReason withdrawn = Withdrawn(); withdrawn != FallbackReason::kNone) {
    for (const auto& attachment : set) {
      if (attachment) attachment->RefuseOffer(accepted_fd, ends);
    }
    return std::make_unique<TcpTransport>(accepted_fd, withdrawn);
  }
  FallbackReason first = FallbackReason::kNone;
  FallbackReason kept = FallbackReason::kNone;
  for (const auto& attachment : set) {
    if (!attachment) continue;
    Decline d;
    std::unique_ptr<Transport> t = attachment->Claim(accepted_fd, ends, &d);
    if (t) return t;
    if (d.applies) {
      kept = d.reason;
      break;
    }
    if (first == FallbackReason::kNone) first = d.reason;
  }
  if (kept == FallbackReason::kNone) kept = first;
  if (kept == FallbackReason::kNone) {
    if (const Rule* rule = RuleAtLine(rule_line)) {
      Allowed a;
      Resolve(rule->policy, rule->transport, FallbackReason::kDisabledByRule,
              GetRules().file.c_str(), &a);
      kept = a.none;
    } else {
      kept = EnvironmentAllowed().none;
    }
  }
  return std::make_unique<TcpTransport>(accepted_fd, kept);
}

}  // namespace vsocket
