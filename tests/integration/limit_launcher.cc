// vsocket_limit_launcher: runs a program with one resource taken away, for
// exhausted_resources_test.cc.
//
//   vsocket_limit_launcher [--as-extra BYTES] [--deny-memfd]
//                          [--memlock BYTES] -- PROGRAM ARGS...
//
//   --as-extra BYTES  RLIMIT_AS = this launcher's own address space (which a
//                     program linking libvsocket roughly shares) + BYTES, so
//                     a program runs but a large mapping fails with ENOMEM
//   --deny-memfd      a seccomp filter makes memfd_create fail with EPERM
//                     (as a sandbox that forbids it would)
//   --memlock BYTES   RLIMIT_MEMLOCK = BYTES, and CAP_IPC_LOCK dropped from
//                     the bounding set so that root's program obeys it
//                     (RDMA memory registration)
// Exit: the program's (exec), 127 if it could not be started.
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "add this architecture's AUDIT_ARCH_*"
#endif

bool DenyMemfdCreate() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

unsigned long long OwnAddressSpace() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--deny-memfd") == 0) {
      if (!DenyMemfdCreate()) {
        std::perror("vsocket_limit_launcher: seccomp");
        return 127;
      }
    } else if (std::strcmp(argv[i], "--as-extra") == 0 && i + 1 < argc) {
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = OwnAddressSpace() + std::strtoull(argv[++i], nullptr, 0);
      if (setrlimit(RLIMIT_AS, &lim) != 0) {
        std::perror("vsocket_limit_launcher: setrlimit");
        return 127;
      }
    } else if (std::strcmp(argv[i], "--memlock") == 0 && i + 1 < argc) {
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = std::strtoull(argv[++i], nullptr, 0);
      if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0 ||
          (prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) != 0 && errno != EPERM)) {
        std::perror("vsocket_limit_launcher: memlock");
        return 127;
      }
    } else {
      std::fprintf(stderr, "vsocket_limit_launcher: unknown option %s\n", argv[i]);
      return 127;
    }
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr, "usage: vsocket_limit_launcher [OPTIONS] -- PROGRAM ARGS...\n");
    return 127;
  }
  execv(argv[i + 1], argv + i + 1);
  std::perror("vsocket_limit_launcher: exec");
  return 127;
}
