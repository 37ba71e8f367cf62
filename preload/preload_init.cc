// Library constructor.  Runs after libc is initialised (it is a dependency of
// this library, so the loader initialises it first) and before the program's
// main().  Interposed calls made earlier, from other libraries' constructors,
// are safe too: every piece of state initialises itself on first use.
#include "preload/descriptors.h"
#include "preload/exec_handover.h"
#include "vsocket/socket_table.h"

namespace {

__attribute__((constructor)) void VsocketPreloadInit() {
  // Creates the socket table, which registers its fork handlers and the
  // VSOCKET_STATS exit hook; then ours, so that ours lock first in fork().
  vsocket::MaybeVirtualFd(-1);
  vsocket::preload::InitDescriptors();
  // Sockets handed over by the image that exec'd this one, if any.
  vsocket::preload::AdoptInheritedSockets();
}

}  // namespace
