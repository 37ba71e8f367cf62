// vfork(): the child shares the parent's memory until it execs or exits,
// so vsocket can do nothing in it (descriptors.h, SharesParentMemory): its
// exec hands no connection over, and a shared-memory connection it passes
// on would reach the new image as a reset socket.  So before the real
// vfork() runs, every connection of the process moves to kernel TCP
// (reason `vfork`, move_to_tcp.h), as posix_spawn with file actions does
// (interpose_spawn.cc): the child may dup2() any of them, close-on-exec or
// not, onto the numbers the new image keeps.  The new image, preloaded or
// not, then gets the TCP socket with every byte, as without vsocket.
//
// The wrapper cannot be a C function that calls vfork(): the child would
// return from the wrapper's frame and the parent, resumed later, would
// return through the frame the child overwrote.  So `vfork` is a few
// instructions of assembly that call the preparation, then jump to libc's
// vfork() with the caller's own return address on the stack: to both
// processes it is as if the program had called libc directly.
// x86-64 only; elsewhere vfork() is not interposed (docs/COMPATIBILITY.md).
//
// Threads: the calling thread moves; other threads' calls on a connection
// that moves finish under its transport's locks (move_to_tcp.h).
#include <unistd.h>

#include <atomic>

#include "base/real_libc.h"
#include "preload/move_to_tcp.h"
#include "preload/real_calls.h"
#include "vsocket/fallback_reason.h"

#if defined(__x86_64__)

namespace {

bool Any(int) { return true; }

pid_t ForkInsteadOfVfork() { return vsocket::preload::real::fork(); }

}  // namespace

// Called by the `vfork` trampoline below, on the caller's stack; returns
// the function to jump to (libc's vfork(); fork() if it cannot be found,
// which a vfork() caller must accept).
extern "C" __attribute__((visibility("hidden"), used)) void* vsocket_preload_prepare_vfork() {
  using Fn = pid_t (*)();
  static std::atomic<Fn> real{nullptr};
  vsocket::preload::MoveConnectionsToKernelTcp(&Any, vsocket::FallbackReason::kVfork);
  Fn fn = vsocket::sys::NextSymbol(&real, "vfork");
  return reinterpret_cast<void*>(fn != nullptr ? fn : &ForkInsteadOfVfork);
}

// On entry %rsp is 8 mod 16 (the return address); the call needs 0 mod 16.
asm(R"(
  .text
  .globl vfork
  .type vfork, @function
  .p2align 4
vfork:
  .cfi_startproc
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call vsocket_preload_prepare_vfork@PLT
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  jmp *%rax
  .cfi_endproc
  .size vfork, .-vfork
)");

#endif  // __x86_64__
