// Shared by the interposer's translation units (preload/*.cc).
//
// Every exported function follows one pattern: a descriptor that
// vsocket::MaybeVirtualFd() rejects goes straight to the real libc function
// (one lock-free bit test, then the call); anything else goes through the
// vsocket API or the bookkeeping below.  No code here calls the plain libc
// names of interposed functions: vsocket::sys:: (base/real_libc.h) and
// preload::real:: (real_calls.h) resolve the next definition instead.
#ifndef VSOCKET_PRELOAD_PRELOAD_INTERNAL_H_
#define VSOCKET_PRELOAD_PRELOAD_INTERNAL_H_

#include <sys/socket.h>
#include <sys/types.h>

#include "vsocket/socket_table.h"

// Marks a definition as one of the interposed (exported) symbols.  The
// version script (exports.map) is what really decides the export list.
#define VSP_EXPORT extern "C" __attribute__((visibility("default")))

namespace vsocket::preload {

inline bool Ours(int fd) { return __builtin_expect(MaybeVirtualFd(fd), 0); }

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_PRELOAD_INTERNAL_H_
