#include "fifo_bridge/segment_fault_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "base/real_libc.h"
#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_segment.h"

namespace vsocket::fifo {
namespace {

constexpr char kSegmentPathPrefix[] = "/dev/shm/vsocket-";
constexpr size_t kPage = 4096;

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

int LibcSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static std::atomic<SigactionFn> cache{nullptr};
  SigactionFn fn = sys::NextSymbol(&cache, "sigaction");
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  return fn(sig, act, old);
}

struct sigaction g_previous;  // written once, before the guard is installed

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
// True when it is a segment mapping (offset 0, our path) holding `addr`.
bool IsSegmentLineFor(const char* line, uintptr_t addr, uintptr_t* start,
                      uintptr_t* end) {
  const char* p = line;
  *start = ParseHex(&p);
  if (*p++ != '-') return false;
  *end = ParseHex(&p);
  if (addr < *start || addr >= *end) return false;
  SkipField(&p);  // perms
  while (*p == ' ') ++p;
  if (ParseHex(&p) != 0) return false;  // offset
  SkipField(&p);  // dev
  SkipField(&p);  // inode
  while (*p == ' ') ++p;
  return std::strncmp(p, kSegmentPathPrefix, sizeof(kSegmentPathPrefix) - 1) == 0;
}

bool FindSegmentMapping(uintptr_t addr, uintptr_t* start, uintptr_t* end) {
  int fd = static_cast<int>(
      ::syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buf[4096];
  char line[512];
  size_t len = 0;
  bool found = false;
  while (!found) {
    ssize_t n = ::syscall(SYS_read, fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !found; ++i) {
      if (buf[i] == '\n') {
        line[len] = '\0';
        found = IsSegmentLineFor(line, addr, start, end);
        len = 0;
      } else if (len < sizeof(line) - 1) {
        line[len++] = buf[i];  // a longer line keeps its start: enough here
      }
    }
  }
  ::syscall(SYS_close, fd);
  return found;
}

void Chain(int sig, siginfo_t* info, void* context) {
  // sa_handler and sa_sigaction share storage: SIG_DFL/SIG_IGN whatever
  // the flags say.
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    if (g_previous.sa_flags & SA_SIGINFO) {
      g_previous.sa_sigaction(sig, info, context);
    } else {
      g_previous.sa_handler(sig);
    }
    return;
  }
  bool sent = info->si_code <= 0;  // kill(), sigqueue(): not a fault
  if (sent && g_previous.sa_handler == SIG_IGN) return;
  // The default action: for a fault, the retried access faults again; a
  // sent signal is raised again (blocked until this handler returns).
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  LibcSigaction(sig, &dfl, nullptr);
  if (sent) ::syscall(SYS_tgkill, ::getpid(), ::gettid(), sig);
}

void Handler(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  bool recovered = RecoverSegmentFault(info);
  errno = saved;
  if (!recovered) Chain(sig, info, context);
}

}  // namespace

bool RecoverSegmentFault(const siginfo_t* info) {
  if (info == nullptr || info->si_signo != SIGBUS || info->si_code != BUS_ADRERR)
    return false;
  uintptr_t start = 0, end = 0;
  if (!FindSegmentMapping(reinterpret_cast<uintptr_t>(info->si_addr), &start, &end))
    return false;
  size_t bytes = end - start;
  if (bytes < kSegmentHeaderBytes + 2 * kPage || (bytes - kSegmentHeaderBytes) % (2 * kPage))
    return false;
  void* fresh = reinterpret_cast<void*>(
      ::syscall(SYS_mmap, start, bytes, PROT_READ | PROT_WRITE,
                MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (fresh != reinterpret_cast<void*>(start)) return false;
  auto* base = reinterpret_cast<uint8_t*>(start);
  size_t stride = (bytes - kSegmentHeaderBytes) / 2;
  reinterpret_cast<SegmentHeader*>(base)->claim.store(kClaimed, std::memory_order_relaxed);
  for (size_t ring = 0; ring < 2; ++ring) {
    auto* control = reinterpret_cast<RingControl*>(base + kSegmentHeaderBytes + ring * stride);
    control->flags.store(kReset, std::memory_order_release);
  }
  static const char kMessage[] =
      "vsocket: warn: a shared-memory segment lost its pages (truncated by the peer, or "
      "/dev/shm full); that connection is reset\n";
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) ::syscall(SYS_write, 2, kMessage, sizeof(kMessage) - 1);
  return true;
}

void InstallSegmentFaultGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction guard = {};
    guard.sa_sigaction = Handler;
    guard.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&guard.sa_mask);
    // g_previous is complete before the guard can run: query, then install.
    if (LibcSigaction(SIGBUS, nullptr, &g_previous) != 0) return;
    LibcSigaction(SIGBUS, &guard, nullptr);
  });
}

}  // namespace vsocket::fifo
