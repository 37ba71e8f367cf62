// The process's transport providers, in priority order (first = preferred).
//
// Who registers: the library's assembly (providers/builtin_providers.cc)
// defines InstallBuiltinProviders(), which calls RegisterProvider() once
// per backend; the registry calls it exactly once, on first use.  The core
// includes no backend header: it only sees TransportProvider.
//
// Threading: Providers() and the lookups are safe from any thread once
// installed (the list never changes afterwards).  RegisterProvider() is for
// InstallBuiltinProviders() only.
#ifndef VSOCKET_VSOCKET_PROVIDER_REGISTRY_H_
#define VSOCKET_VSOCKET_PROVIDER_REGISTRY_H_

#include <vector>

#include "vsocket/transport_kind.h"
#include "vsocket/transport_provider.h"

namespace vsocket {

// Defined by the library's assembly, not by the core.
// REQUIRES: called only by the registry (once).
void InstallBuiltinProviders();

// REQUIRES: called from InstallBuiltinProviders(); `provider` lives for the
// whole process; its kind is neither kTcp nor an already registered one
// (a duplicate is logged and ignored).
void RegisterProvider(TransportProvider* provider);

// Every registered provider, in priority order.
const std::vector<TransportProvider*>& Providers();

// The provider called `name`, or nullptr.
TransportProvider* ProviderNamed(const char* name);

// Calls every provider's BeforeKernelWait().
void ProvidersBeforeKernelWait();
// Calls every provider's FlushHeldBack().
void ProvidersFlushHeldBack();

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_PROVIDER_REGISTRY_H_
