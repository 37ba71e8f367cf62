#include "base/shared_file_fault_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/real_libc.h"
#include "base/signal_chain.h"
#include "base/user_copy_guard.h"

namespace vsocket {
namespace {

constexpr char kSharedPathPrefix[] = "/dev/shm/vsocket-";
constexpr int kMaxRecoverers = 4;

std::atomic<SharedFileRecoverer> g_recoverers[kMaxRecoverers];

PreviousSignalHandler g_previous;

// Hex number at *p; advances *p past it.
uintptr_t ParseHex(const char** p) {
  uintptr_t v = 0;
  for (;; ++*p) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + static_cast<uintptr_t>(d);
  }
}

// Skips the blanks before a field, then the field.
void SkipField(const char** p) {
  while (**p == ' ') ++*p;
  while (**p && **p != ' ') ++*p;
}

// One /proc/self/maps line: "start-end perms offset dev inode   path".
// True when it maps a file under kSharedPathPrefix and holds `addr`.
bool ParseLineFor(const char* line, uintptr_t addr, SharedFileMapping* m) {
  const char* p = line;
  m->start = ParseHex(&p);
  if (*p++ != '-') return false;
  m->end = ParseHex(&p);
  if (addr < m->start || addr >= m->end) return false;
  SkipField(&p);  // perms
  while (*p == ' ') ++p;
  m->offset = ParseHex(&p);
  SkipField(&p);  // dev
  SkipField(&p);  // inode
  while (*p == ' ') ++p;
  m->path = p;
  return std::strncmp(p, kSharedPathPrefix, sizeof(kSharedPathPrefix) - 1) == 0;
}

// Finds the mapping holding `addr` and offers it to the recoverers.
bool OfferMapping(uintptr_t addr) {
  int fd = static_cast<int>(
      ::syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buf[4096];
  char line[512];
  size_t len = 0;
  bool found = false, recovered = false;
  SharedFileMapping m;
  while (!found) {
    ssize_t n = ::syscall(SYS_read, fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !found; ++i) {
      if (buf[i] == '\n') {
        line[len] = '\0';
        found = ParseLineFor(line, addr, &m);
        len = 0;
      } else if (len < sizeof(line) - 1) {
        line[len++] = buf[i];  // a longer line keeps its start: enough here
      }
    }
  }
  ::syscall(SYS_close, fd);
  for (int i = 0; found && !recovered && i < kMaxRecoverers; ++i) {
    SharedFileRecoverer r = g_recoverers[i].load(std::memory_order_acquire);
    if (r != nullptr) recovered = r(m);
  }
  return recovered;
}

void Handler(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  bool recovered = RecoverSharedFileFault(info);
  errno = saved;
  if (recovered) return;
  // Not a page of ours: a copy from a caller's file mapping that shrank?
  if (RecoverUserCopyFault(sig, info, context)) return;
  g_previous.Forward(sig, info, context);
}

}  // namespace

bool ReplaceWithZeroPages(const SharedFileMapping& m, std::atomic<bool>* said,
                          const char* message) {
  void* fresh = reinterpret_cast<void*>(
      ::syscall(SYS_mmap, m.start, m.end - m.start, PROT_READ | PROT_WRITE,
                MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (fresh != reinterpret_cast<void*>(m.start)) return false;
  if (!said->exchange(true)) ::syscall(SYS_write, 2, message, std::strlen(message));
  return true;
}

bool RecoverSharedFileFault(const siginfo_t* info) {
  if (info == nullptr || info->si_signo != SIGBUS || info->si_code != BUS_ADRERR)
    return false;
  return OfferMapping(reinterpret_cast<uintptr_t>(info->si_addr));
}

void GuardSharedFiles(SharedFileRecoverer recoverer) {
  static std::mutex mu;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& slot : g_recoverers) {
      SharedFileRecoverer r = slot.load(std::memory_order_relaxed);
      if (r == recoverer) break;
      if (r == nullptr) {
        slot.store(recoverer, std::memory_order_release);
        break;
      }
    }
  }
  static std::once_flag once;
  std::call_once(once, [] {
    InstallInFront(SIGBUS, Handler, &g_previous);
  });
}

}  // namespace vsocket
