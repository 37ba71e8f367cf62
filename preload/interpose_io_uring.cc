// io_uring: the kernel runs a ring's socket operations (IORING_OP_ACCEPT,
// RECV, SEND, ...) without libc, so vsocket never sees them; on a
// shared-memory connection they would act on the wait socket (ENOTCONN, a
// NUL byte), and a client of a ring's accept would wait out the claim
// timeout.  So the moment a program starts a ring, the whole process goes
// to kernel TCP (reason `io_uring`), as it would be without vsocket:
//  - new connections and listeners get no fabric, and an accept through
//    libc declines a client's offer at once (WithdrawFastPaths);
//  - every listener stops announcing shared memory
//    (ListenerAttachment::PassedOut), so new clients do not offer;
//  - every connection moves to kernel TCP (move_to_tcp.h).
// A ring used only for files costs the process its fast paths too: vsocket
// cannot tell what a ring will carry.
//
// Seen: liburing's io_uring_setup, io_uring_queue_init and
// io_uring_queue_init_params (Debian's liburing makes its system calls
// without libc), and glibc's syscall(SYS_io_uring_setup)
// (interpose_clone.cc).  Not seen: a liburing linked statically into the
// program, or a system call made without libc (docs/COMPATIBILITY.md).
//
// vsocket's own toe engine starts rings too.  Its liburing is a static
// copy inside this library whose three entry points are renamed
// (vsocket_uring_*, preload/CMakeLists.txt), so that these wrappers can
// carry the public names; calls that come from inside this library go to
// that copy and change nothing.
//
// Threads: any thread; the first ring does the work once.
#include <dlfcn.h>
#include <errno.h>

#include <atomic>
#include <type_traits>
#include <memory>

#include "base/real_libc.h"
#include "preload/descriptors.h"
#include "preload/interpose_io_uring.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "vsocket/fallback_reason.h"
#include "vsocket/path_selection.h"
#include "vsocket/virtual_socket.h"

struct io_uring;
struct io_uring_params;

#if VSOCKET_URING_RENAMED
extern "C" {
int vsocket_uring_setup(unsigned entries, struct io_uring_params* p);
int vsocket_uring_queue_init(unsigned entries, struct io_uring* ring, unsigned flags);
int vsocket_uring_queue_init_params(unsigned entries, struct io_uring* ring,
                                    struct io_uring_params* p);
}
#endif

namespace vsocket::preload {
namespace {

bool Any(int) { return true; }

// True when `caller` is code of this library (the toe engine).
bool CalledFromVsocket(const void* caller) {
  static const void* const self_base = [] {
    Dl_info self = {};
    dladdr(reinterpret_cast<const void*>(&CalledFromVsocket), &self);
    return static_cast<const void*>(self.dli_fbase);
  }();
  Dl_info info = {};
  return dladdr(caller, &info) != 0 && info.dli_fbase == self_base;
}

}  // namespace

void OnIoUringStarted() {
  static std::atomic<bool> started{false};
  if (started.exchange(true, std::memory_order_acq_rel)) return;
  WithdrawFastPaths(FallbackReason::kIoUring);
  int saved = errno;
  int highest = HighestVirtualFd();
  for (int fd = 0; fd <= highest; ++fd) {
    if (!Ours(fd)) continue;
    std::shared_ptr<VirtualSocket> vs = LookupSocket(fd);
    if (!vs || vs->state() != VirtualSocket::State::kListening) continue;
    for (const auto& attachment : vs->listeners()) {
      if (attachment) attachment->PassedOut();
    }
  }
  MoveConnectionsToKernelTcp(&Any, FallbackReason::kIoUring);
  errno = saved;
}

}  // namespace vsocket::preload

// liburing returns -errno from each of these.  A call from this library
// goes to its own copy (`own`; none without the renamed copy); the
// program's goes, after the move, to the next definition (the program's
// liburing).  `caller`: the wrapper's return address.
namespace {

// `own` and `args` take their types from `real` (own may be nullptr).
template <typename... Args>
int SetUpRing(std::atomic<int (*)(Args...)>* real, const char* name,
              std::type_identity_t<int (*)(Args...)> own, const void* caller,
              std::type_identity_t<Args>... args) {
  if (!vsocket::preload::CalledFromVsocket(caller)) {
    vsocket::preload::OnIoUringStarted();
  } else if (own != nullptr) {
    return own(args...);
  }
  int (*fn)(Args...) = vsocket::sys::NextSymbol(real, name);
  return fn ? fn(args...) : -ENOSYS;
}

#if VSOCKET_URING_RENAMED
#define VSOCKET_OWN_URING(f) (&f)
#else
#define VSOCKET_OWN_URING(f) nullptr
#endif

}  // namespace

VSP_EXPORT int io_uring_setup(unsigned entries, struct io_uring_params* p) {
  static std::atomic<int (*)(unsigned, struct io_uring_params*)> real{nullptr};
  return SetUpRing(&real, "io_uring_setup", VSOCKET_OWN_URING(vsocket_uring_setup),
                   __builtin_return_address(0), entries, p);
}

VSP_EXPORT int io_uring_queue_init(unsigned entries, struct io_uring* ring,
                                   unsigned flags) {
  static std::atomic<int (*)(unsigned, struct io_uring*, unsigned)> real{nullptr};
  return SetUpRing(&real, "io_uring_queue_init", VSOCKET_OWN_URING(vsocket_uring_queue_init),
                   __builtin_return_address(0), entries, ring, flags);
}

VSP_EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring* ring,
                                          struct io_uring_params* p) {
  static std::atomic<int (*)(unsigned, struct io_uring*, struct io_uring_params*)> real{
      nullptr};
  return SetUpRing(&real, "io_uring_queue_init_params",
                   VSOCKET_OWN_URING(vsocket_uring_queue_init_params),
                   __builtin_return_address(0), entries, ring, p);
}
