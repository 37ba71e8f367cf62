#include "vsocket/provider_registry.h"

#include <cstring>
#include <mutex>

#include "vsocket/log.h"

namespace vsocket {
namespace {

struct Registry {
  std::vector<TransportProvider*> providers;
  TransportProvider* by_kind[kMaxTransportKinds] = {};
};

// Leaked: used until the last atexit handler.
Registry* g_registry = nullptr;
bool g_installing = false;

Registry& Installed() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_registry = new Registry();
    g_installing = true;
    InstallBuiltinProviders();
    g_installing = false;
  });
  return *g_registry;
}

}  // namespace

void RegisterProvider(TransportProvider* provider) {
  if (!g_installing || !provider) return;
  int index = KindIndex(provider->kind());
  if (index <= 0 || index >= kMaxTransportKinds || g_registry->by_kind[index]) {
    VSOCKET_LOG(kError, "transport provider %s: kind %d is not free; ignored",
                provider->name(), index);
    return;
  }
  g_registry->by_kind[index] = provider;
  g_registry->providers.push_back(provider);
}

const std::vector<TransportProvider*>& Providers() {
  return Installed().providers;
}

TransportProvider* ProviderNamed(const char* name) {
  for (TransportProvider* p : Providers()) {
    if (std::strcmp(p->name(), name) == 0) return p;
  }
  return nullptr;
}

void ProvidersBeforeKernelWait() {
  for (TransportProvider* p : Providers()) p->BeforeKernelWait();
}

void ProvidersFlushHeldBack() {
  for (TransportProvider* p : Providers()) p->FlushHeldBack();
}

const char* TransportKindName(TransportKind kind) {
  if (kind == TransportKind::kTcp) return "tcp";
  int index = KindIndex(kind);
  if (index <= 0 || index >= kMaxTransportKinds) return "unknown";
  TransportProvider* p = Installed().by_kind[index];
  return p ? p->name() : "unknown";
}

}  // namespace vsocket
