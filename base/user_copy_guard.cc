#include "base/user_copy_guard.h"

#include <errno.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <mutex>

#include "base/shared_file_fault_guard.h"
#include "base/signal_chain.h"

namespace vsocket {
namespace user_copy_internal {

__attribute__((tls_model("initial-exec"))) thread_local Frame* t_frame = nullptr;

bool RunGuarded(void (*run)(void*), void* arg) {
  Frame frame;
  Frame* outer = t_frame;
  // savemask 0: no sigprocmask on the fast path; the handler unblocks the
  // signal itself before it jumps.
  if (sigsetjmp(frame.env, 0) != 0) {
    t_frame = outer;
    return false;
  }
  t_frame = &frame;
  run(arg);
  t_frame = outer;
  return true;
}

}  // namespace user_copy_internal

#if VSOCKET_COPY_USER_BY_LANDING
// size_t vsocket_copy_user_bytes_left(void* dst, const void* src, size_t n),
// n <= kLandingCopyMax: the bytes not copied (0: all).  Two ways through:
//  - The fast one (begin .. end): no loop up to 64 bytes (two or four
//    16-byte moves, the last ones overlapping; two overlapping 8- or 4-byte
//    moves below 16), then 32-byte steps with the last 32 bytes loaded
//    first and stored last (overlapping); a fault there is not precise
//    (moves overlap), so its landing starts the copy again from the
//    arguments kept in r9-r11, the slow way.
//  - The slow one: one `rep movsb`, which faults exactly at the first bad
//    byte with RCX = the bytes left; its landing returns them.
// The handler moves the program counter (RecoverUserCopyFault).  No stack
// is used.  Hidden: the preload library exports nothing of it.
asm(R"(
    .text
    .p2align 4
    .globl vsocket_copy_user_bytes_left
    .hidden vsocket_copy_user_bytes_left
    .type vsocket_copy_user_bytes_left, @function
vsocket_copy_user_bytes_left:
    .cfi_startproc
    movq %rdi, %r9
    movq %rsi, %r10
    movq %rdx, %r11
    .globl vsocket_copy_user_fast_begin
    .hidden vsocket_copy_user_fast_begin
vsocket_copy_user_fast_begin:
    cmpq $16, %rdx
    jb 2f
    cmpq $32, %rdx
    ja 7f
    movdqu (%rsi), %xmm0
    movdqu -16(%rsi,%rdx), %xmm1
    movdqu %xmm0, (%rdi)
    movdqu %xmm1, -16(%rdi,%rdx)
    xorl %eax, %eax
    ret
7:  movdqu -32(%rsi,%rdx), %xmm2
    movdqu -16(%rsi,%rdx), %xmm3
    leaq -32(%rdi,%rdx), %r8
    cmpq $64, %rdx
    ja 1f
    movdqu (%rsi), %xmm0
    movdqu 16(%rsi), %xmm1
    movdqu %xmm0, (%rdi)
    movdqu %xmm1, 16(%rdi)
    movdqu %xmm2, (%r8)
    movdqu %xmm3, 16(%r8)
    xorl %eax, %eax
    ret
1:  movdqu (%rsi), %xmm0
    movdqu 16(%rsi), %xmm1
    movdqu %xmm0, (%rdi)
    movdqu %xmm1, 16(%rdi)
    addq $32, %rsi
    addq $32, %rdi
    subq $32, %rdx
    cmpq $32, %rdx
    ja 1b
    movdqu %xmm2, (%r8)
    movdqu %xmm3, 16(%r8)
    xorl %eax, %eax
    ret
2:  cmpq $8, %rdx
    jb 3f
    movq (%rsi), %rax
    movq -8(%rsi,%rdx), %rcx
    movq %rax, (%rdi)
    movq %rcx, -8(%rdi,%rdx)
    xorl %eax, %eax
    ret
3:  cmpq $4, %rdx
    jb 4f
    movl (%rsi), %eax
    movl -4(%rsi,%rdx), %ecx
    movl %eax, (%rdi)
    movl %ecx, -4(%rdi,%rdx)
    xorl %eax, %eax
    ret
4:  testq %rdx, %rdx
    jz 6f
5:  movzbl (%rsi), %eax
    movb %al, (%rdi)
    incq %rsi
    incq %rdi
    decq %rdx
    jnz 5b
6:  xorl %eax, %eax
    ret
    .globl vsocket_copy_user_fast_end
    .hidden vsocket_copy_user_fast_end
vsocket_copy_user_fast_end:
    .globl vsocket_copy_user_fast_landing
    .hidden vsocket_copy_user_fast_landing
vsocket_copy_user_fast_landing:
    movq %r9, %rdi
    movq %r10, %rsi
    movq %r11, %rcx
    .globl vsocket_copy_user_insn
    .hidden vsocket_copy_user_insn
vsocket_copy_user_insn:
    rep movsb
    .globl vsocket_copy_user_landing
    .hidden vsocket_copy_user_landing
vsocket_copy_user_landing:
    movq %rcx, %rax
    ret
    .cfi_endproc
    .size vsocket_copy_user_bytes_left, .-vsocket_copy_user_bytes_left
)");
extern "C" const char vsocket_copy_user_fast_begin[];
extern "C" const char vsocket_copy_user_fast_end[];
extern "C" const char vsocket_copy_user_fast_landing[];
extern "C" const char vsocket_copy_user_insn[];
extern "C" const char vsocket_copy_user_landing[];
#endif

namespace {

PreviousSignalHandler g_previous_segv;
PreviousSignalHandler g_previous_bus;

void Handler(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  // A page of one of vsocket's shared files (a ring) is its owner's to
  // replace, even in the middle of a guarded copy.
  if (sig == SIGBUS && RecoverSharedFileFault(info)) {
    errno = saved;
    return;
  }
  if (RecoverUserCopyFault(sig, info, context)) {
    errno = saved;
    return;
  }
  errno = saved;
  (sig == SIGSEGV ? g_previous_segv : g_previous_bus).Forward(sig, info, context);
}

}  // namespace

size_t CopyUserBytesGuarded(void* dst, const void* src, size_t n) {
  // A null pointer is always bad, and must not reach memcpy (undefined
  // behaviour there, not a fault the guard could be counted on to catch).
  if (n != 0 && (dst == nullptr || src == nullptr)) [[unlikely]] return 0;
  return GuardedUserCopy([&] { __builtin_memcpy(dst, src, n); }) ? n : 0;
}

bool RecoverUserCopyFault(int sig, const siginfo_t* info, void* context) {
  using user_copy_internal::t_frame;
  if (sig != SIGSEGV && sig != SIGBUS) return false;
  if (info == nullptr || info->si_code <= 0) return false;  // sent, not a fault
#if VSOCKET_COPY_USER_BY_LANDING
  if (context != nullptr) {
    greg_t& pc = static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP];
    if (pc == reinterpret_cast<greg_t>(vsocket_copy_user_insn)) {
      pc = reinterpret_cast<greg_t>(vsocket_copy_user_landing);
      return true;
    }
    if (pc >= reinterpret_cast<greg_t>(vsocket_copy_user_fast_begin) &&
        pc < reinterpret_cast<greg_t>(vsocket_copy_user_fast_end)) {
      pc = reinterpret_cast<greg_t>(vsocket_copy_user_fast_landing);
      return true;
    }
  }
#else
  (void)context;
#endif
  user_copy_internal::Frame* frame = t_frame;
  if (frame == nullptr) return false;
  // The kernel blocked `sig` for the handler; the jump skips its return.
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  ::syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &unblock, nullptr, _NSIG / 8);
  siglongjmp(frame->env, 1);
}

void InstallUserCopyGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    InstallInFront(SIGSEGV, Handler, &g_previous_segv);
    InstallInFront(SIGBUS, Handler, &g_previous_bus);
  });
}

}  // namespace vsocket
