#include "vsocket/live_stats.h"
#include "base/after_fork.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "base/pid_namespace.h"
#include "base/private_directory.h"
#include "base/real_libc.h"
#include "base/shared_file_fault_guard.h"
#include "vsocket/config.h"
#include "vsocket/log.h"
#include "vsocket/provider_registry.h"
#include "vsocket/rules.h"

namespace vsocket {
namespace {

// Everything below is guarded by `mu` except `header`, which is published
// once (release) and read without it.
struct Page {
  std::mutex mu;
  std::atomic<LiveHeader*> header{nullptr};
  LiveSlot* chunks[kLiveMaxChunks] = {};
  uint32_t chunk_count = 0;
  bool file_backed = false;
  bool set_aside = false;           // renamed to ".exec" before an exec
  // Free slots below the high-water mark (header->slots_used), LIFO; past
  // it every slot of the mapped chunks is free.
  std::vector<LiveSlot*> free_slots;
};

// Never destroyed: the at-exit printer and late threads may still use it.
Page& ThePage() {
  static Page* page = new Page();
  return *page;
}

uint64_t MonotonicNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Field 22 of /proc/self/stat: with the pid, names this process (not a
// later one that reuses the pid).
uint64_t SelfStartTicks() {
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = sys::read(fd, buf, sizeof(buf) - 1);
  sys::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  // After ")": field 3 is the state; 22 is 19 fields on.
  int field = 2;
  for (++p; *p && field < 22; ++p) {
    if (*p == ' ') ++field;
  }
  return std::strtoull(p, nullptr, 10);
}

std::string PathFor(pid_t pid, const char* suffix) {
  std::string dir = LiveStatsDirectory();
  if (dir.empty()) return "";
  return dir + "/stat-" + std::to_string(pid) + suffix;
}

void CopyName(char* out, size_t size, const char* in) {
  std::snprintf(out, size, "%s", in ? in : "");
}

void FillHeader(LiveHeader* h) {
  h->version = kLiveVersion;
  h->header_bytes = kLiveHeaderBytes;
  h->slot_bytes = kLiveSlotBytes;
  h->slots_per_chunk = kLiveSlotsPerChunk;
  h->pid = static_cast<int32_t>(::getpid());
  h->start_ticks = SelfStartTicks();
  h->created_ns = MonotonicNs();
  CopyName(h->program, sizeof(h->program), ProgramName());
  CopyName(h->rules_file, sizeof(h->rules_file), GetRules().file.c_str());
  // Installing the providers registers their kinds and their fallback
  // reasons: every number this process will count is named below.
  Providers();
  for (int k = 0; k < kLiveKinds; ++k) {
    const char* name = TransportKindName(static_cast<TransportKind>(k));
    if (std::strcmp(name, "unknown") != 0) CopyName(h->kind_names[k], 16, name);
  }
  static_assert(kMaxFallbackReasons <= kLiveReasons, "the page has no room for every reason");
  const int reasons = FallbackReasonCount();
  for (int r = 1; r < reasons; ++r) {
    CopyName(h->reason_names[r], kLiveNameBytes,
             FallbackReasonName(static_cast<FallbackReason>(r)));
  }
}

void* MapAnonymous(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Opens the file at `path` for writing as this process's page, `bytes`
// long.  -1 on failure.
int CreateFile(const std::string& path, size_t bytes) {
  ::unlink(path.c_str());  // a leftover of a dead process of this pid
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    sys::close(fd);
    ::unlink(path.c_str());
    return -1;
  }
  return fd;
}

// Async-signal-safe (base/shared_file_fault_guard.h): a mapping of our
// page file that lost its pages (another process of the user truncated it)
// gets private zero pages.  Counting goes on into them; vsocket-stat no
// longer sees this process's updates.
bool RecoverLivePage(const SharedFileMapping& m) {
  const char* name = std::strrchr(m.path, '/');
  if (name == nullptr || std::strncmp(name + 1, "stat-", 5) != 0) return false;
  static std::atomic<bool> said{false};
  return ReplaceWithZeroPages(
      m, &said,
      "vsocket: warn: the live statistics page lost its pages (truncated by another "
      "process); vsocket-stat no longer sees this process's updates\n");
}

void* MapFile(int fd, size_t bytes, off_t offset, void* at) {
  GuardSharedFiles(RecoverLivePage);  // before the first mapping (once)
  void* p = ::mmap(at, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | (at ? MAP_FIXED : 0), fd, offset);
  return p == MAP_FAILED ? nullptr : p;
}

off_t ChunkOffset(uint32_t i) {
  return static_cast<off_t>(kLiveHeaderBytes + static_cast<size_t>(i) * kLiveChunkBytes);
}

LiveSlot* SlotAt(const Page& page, uint32_t index) {
  return &page.chunks[index / kLiveSlotsPerChunk][index % kLiveSlotsPerChunk];
}

void UnlinkAtExit() {
  Page& page = ThePage();
  if (!page.file_backed) return;
  std::string path = PathFor(::getpid(), page.set_aside ? ".exec" : "");
  if (!path.empty()) ::unlink(path.c_str());
}

// Pages of processes that are gone (killed, or exec'd into an image that
// is not preloaded) would stay until vsocket-stat runs: each new page
// removes up to 64 of them.  Only files named stat-<pid>[.exec|.new] in our
// own directory, whose pid does not exist.
void RemoveDeadPages(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "stat-", 5) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(e->d_name + 5, &end, 10);
    if (end == e->d_name + 5 || pid <= 0 ||
        (*end && std::strcmp(end, ".exec") != 0 && std::strcmp(end, ".new") != 0)) {
      continue;
    }
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0 && ++removed >= 64) break;
  }
  ::closedir(d);
}

// REQUIRES: page.mu held, no header yet.
void MakePage(Page& page) {
  LiveHeader* header = nullptr;
  LiveSlot* chunk = nullptr;
  std::string path = GetConfig().live_stats ? PathFor(::getpid(), "") : "";
  if (!path.empty()) {
    std::string temp = path + ".new";
    ::unlink((path + ".exec").c_str());  // set aside by our previous image
    int fd = CreateFile(temp, kLiveHeaderBytes + kLiveChunkBytes);
    RemoveDeadPages(LiveStatsDirectory());
    if (fd >= 0) {
      header = static_cast<LiveHeader*>(MapFile(fd, kLiveHeaderBytes, 0, nullptr));
      chunk = header ? static_cast<LiveSlot*>(
                           MapFile(fd, kLiveChunkBytes, ChunkOffset(0), nullptr))
                     : nullptr;
      sys::close(fd);
      if (header && chunk) {
        FillHeader(header);
        header->chunks.store(1, std::memory_order_relaxed);
        __atomic_store_n(&header->magic, kLiveMagic, __ATOMIC_RELEASE);
        if (::rename(temp.c_str(), path.c_str()) == 0) {
          page.file_backed = true;
          std::atexit(UnlinkAtExit);
        }
      }
      if (!page.file_backed) {
        if (header) ::munmap(header, kLiveHeaderBytes);
        if (chunk) ::munmap(chunk, kLiveChunkBytes);
        header = nullptr;
        chunk = nullptr;
        ::unlink(temp.c_str());
      }
    }
    if (!page.file_backed) {
      VSOCKET_LOG(kInfo, "live stats: cannot make %s (%s); vsocket-stat will not "
                  "see this process", path.c_str(), strerror(errno));
    }
  }
  if (!header) {
    header = static_cast<LiveHeader*>(MapAnonymous(kLiveHeaderBytes));
    chunk = static_cast<LiveSlot*>(MapAnonymous(kLiveChunkBytes));
    if (!header) {
      // Out of memory at the first connection: counting must still work.
      static LiveHeader fallback_header;
      header = &fallback_header;
    }
    FillHeader(header);
    header->magic = kLiveMagic;
    header->chunks.store(chunk ? 1 : 0, std::memory_order_relaxed);
  }
  if (chunk) {
    page.chunks[0] = chunk;
    page.chunk_count = 1;
  }
  page.header.store(header, std::memory_order_release);
}

// REQUIRES: page.mu held, header made.  Adds a chunk; false if none can be.
bool Grow(Page& page) {
  uint32_t i = page.chunk_count;
  if (i >= kLiveMaxChunks) return false;
  LiveSlot* chunk = nullptr;
  if (page.file_backed) {
    std::string path = PathFor(::getpid(), page.set_aside ? ".exec" : "");
    int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      if (::ftruncate(fd, ChunkOffset(i + 1)) == 0)
        chunk = static_cast<LiveSlot*>(MapFile(fd, kLiveChunkBytes, ChunkOffset(i), nullptr));
      sys::close(fd);
    }
    if (!chunk) return false;  // keep the file's chunks contiguous
  } else {
    chunk = static_cast<LiveSlot*>(MapAnonymous(kLiveChunkBytes));
    if (!chunk) return false;
  }
  page.chunks[i] = chunk;
  page.chunk_count = i + 1;
  page.header.load(std::memory_order_relaxed)->chunks.store(i + 1, std::memory_order_release);
  return true;
}

// The seqlock around a slot's identity.  REQUIRES: page.mu held.
void BeginWrite(LiveSlot* slot) {
  slot->seq.store(slot->seq.load(std::memory_order_relaxed) | 1u, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
void EndWrite(LiveSlot* slot) {
  slot->seq.store((slot->seq.load(std::memory_order_relaxed) | 1u) + 1,
                  std::memory_order_release);
}

// An IPv4 or IPv6 address as the page holds it (len 0: unknown).
void ToLiveAddress(const struct sockaddr_storage& ss, socklen_t len, LiveAddress* out) {
  *out = LiveAddress{};
  if (len == 0) return;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(&ss);
    out->family = AF_INET;
    out->port = ntohs(in->sin_port);
    std::memcpy(out->addr, &in->sin_addr, 4);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(&ss);
    out->family = AF_INET6;
    out->port = ntohs(in6->sin6_port);
    std::memcpy(out->addr, &in6->sin6_addr, 16);
  }
}

// fork(): the child must not write into its parent's file.  No prepare
// handler takes `mu`: a thread holding a VirtualSocket's mutex may wait for
// it while the forking thread's later prepare handlers wait for that
// VirtualSocket.  So the child cannot trust what `mu` guarded if another
// thread held it at the fork, and rebuilds it from the slots themselves.
void RebuildAfterFork(Page& page) {
  // Free slots are recounted below.  A mutex that a thread of the parent
  // held at the fork stays locked here, and the vector it guarded may be
  // in the middle of a reallocation: then both are made afresh and the old
  // buffer is abandoned.  Otherwise the vector is kept, its buffer reused
  // (no leak for a leak checker to report at the child's exit).
  if (page.mu.try_lock()) {
    page.mu.unlock();
    page.free_slots.clear();
  } else {
    new (&page.mu) std::mutex();
    new (&page.free_slots) std::vector<LiveSlot*>();
  }
  LiveHeader* header = page.header.load(std::memory_order_relaxed);
  uint32_t used = std::min(header->slots_used.load(std::memory_order_relaxed),
                           page.chunk_count * kLiveSlotsPerChunk);
  header->slots_used.store(used, std::memory_order_relaxed);
  for (uint32_t i = used; i-- > 0;) {
    LiveSlot* slot = SlotAt(page, i);
    uint32_t seq = slot->seq.load(std::memory_order_relaxed);
    if (seq & 1u) slot->seq.store(seq + 1, std::memory_order_relaxed);  // cut off mid-write
    if (slot->state == kLiveSlotFree) page.free_slots.push_back(slot);
  }
}

// Puts private anonymous memory holding the same bytes at [at, at+bytes).
bool ReplaceWithPrivateCopy(void* at, size_t bytes) {
  void* copy = MapAnonymous(bytes);
  if (!copy) return false;
  std::memcpy(copy, at, bytes);
  void* p = ::mmap(at, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  bool ok = p != MAP_FAILED;
  if (ok) std::memcpy(at, copy, bytes);
  ::munmap(copy, bytes);
  return ok;
}

void ChildAfterFork() {
  Page& page = ThePage();
  LiveHeader* header = page.header.load(std::memory_order_relaxed);
  if (!header) return;
  if (!page.file_backed) {  // private memory: fork copied it
    RebuildAfterFork(page);
    return;
  }
  page.set_aside = false;
  // A file of our own with the parent's bytes, mapped where the parent's
  // was, so every slot pointer stays valid.
  std::string path = PathFor(::getpid(), "");
  std::string temp = path + ".new";
  bool ok = false;
  int fd = path.empty() ? -1 : CreateFile(temp, ChunkOffset(page.chunk_count));
  if (fd >= 0) {
    ok = ::pwrite(fd, header, kLiveHeaderBytes, 0) == static_cast<ssize_t>(kLiveHeaderBytes);
    for (uint32_t i = 0; ok && i < page.chunk_count; ++i) {
      ok = ::pwrite(fd, page.chunks[i], kLiveChunkBytes, ChunkOffset(i)) ==
           static_cast<ssize_t>(kLiveChunkBytes);
    }
    ok = ok && MapFile(fd, kLiveHeaderBytes, 0, header) != nullptr;
    for (uint32_t i = 0; ok && i < page.chunk_count; ++i)
      ok = MapFile(fd, kLiveChunkBytes, ChunkOffset(i), page.chunks[i]) != nullptr;
    sys::close(fd);
    if (ok) {
      header->pid = static_cast<int32_t>(::getpid());
      header->start_ticks = SelfStartTicks();
      ok = ::rename(temp.c_str(), path.c_str()) == 0;
    }
    if (!ok) ::unlink(temp.c_str());
  }
  if (!ok) {
    // No file: private memory, so at least the parent's counts stay its own.
    ReplaceWithPrivateCopy(header, kLiveHeaderBytes);
    for (uint32_t i = 0; i < page.chunk_count; ++i)
      ReplaceWithPrivateCopy(page.chunks[i], kLiveChunkBytes);
    header->pid = static_cast<int32_t>(::getpid());
    page.file_backed = false;
  }
  RebuildAfterFork(page);
}

}  // namespace

std::string LiveStatsDirectory() {
  uid_t euid = ::geteuid();
  std::string dir = "/dev/shm/vsocket-" + std::to_string(euid);
  if (sys::EnsurePrivateDirectory(dir, euid) != 0) return "";
  // One directory per PID namespace: pages are named by pid, and two
  // containers sharing /dev/shm number their processes apart.
  dir += "/live-" + sys::PidNamespaceTag();
  if (sys::EnsurePrivateDirectory(dir, euid) != 0) return "";
  return dir;
}

LiveHeader* LiveStatsHeaderIfMade() {
  return ThePage().header.load(std::memory_order_acquire);
}

LiveHeader* LiveStatsHeader() {
  Page& page = ThePage();
  if (LiveHeader* h = page.header.load(std::memory_order_acquire)) [[likely]] return h;
  static std::once_flag fork_hook;
  std::call_once(fork_hook, [] { ::vsocket::sys::AtFork(nullptr, nullptr, ChildAfterFork); });
  std::lock_guard<std::mutex> lock(page.mu);
  if (!page.header.load(std::memory_order_relaxed)) MakePage(page);
  return page.header.load(std::memory_order_relaxed);
}

LiveSlot* LiveSlotOpen(const LiveSlotIdentity& id) {
  LiveHeader* header = LiveStatsHeader();
  LiveSlot draft{};
  draft.state = kLiveSlotOpen;
  draft.fd = id.fd;
  draft.kind = static_cast<uint32_t>(KindIndex(id.kind));
  draft.reason = static_cast<uint32_t>(id.reason);
  draft.flags = id.accepted ? static_cast<uint32_t>(kLiveAccepted) : 0u;
  draft.rule_line = id.rule_line;
  draft.ring_bytes = id.ring_bytes;
  draft.opened_ns = MonotonicNs();
  // What connect/accept knew; the kernel names the rest.
  ConnectionEndpoints ends = id.ends ? *id.ends : ConnectionEndpoints{};
  if (id.tcp_fd >= 0) {
    ends.NameLocal(id.tcp_fd);
    ends.NamePeer(id.tcp_fd);
  }
  ToLiveAddress(ends.local, ends.local_len, &draft.local);
  ToLiveAddress(ends.peer, ends.peer_len, &draft.peer);
  Page& page = ThePage();
  std::lock_guard<std::mutex> lock(page.mu);
  LiveSlot* slot = nullptr;
  if (!page.free_slots.empty()) {
    slot = page.free_slots.back();
    page.free_slots.pop_back();
  } else {
    uint32_t used = header->slots_used.load(std::memory_order_relaxed);
    if (used >= page.chunk_count * kLiveSlotsPerChunk && !Grow(page)) {
      header->unlisted.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    slot = SlotAt(page, used);
    // Published before the slot is written: a reader sees it free (state
    // 0, or its seqlock odd) until EndWrite.
    header->slots_used.store(used + 1, std::memory_order_release);
  }
  BeginWrite(slot);
  slot->state = draft.state;
  slot->fd = draft.fd;
  slot->kind = draft.kind;
  slot->reason = draft.reason;
  slot->flags = draft.flags;
  slot->rule_line = draft.rule_line;
  slot->ring_bytes = draft.ring_bytes;
  slot->opened_ns = draft.opened_ns;
  slot->local = draft.local;
  slot->peer = draft.peer;
  for (int k = 0; k < kLiveKinds; ++k) {
    slot->bytes_sent[k].store(0, std::memory_order_relaxed);
    slot->bytes_received[k].store(0, std::memory_order_relaxed);
  }
  slot->send_ring_fill.store(0, std::memory_order_relaxed);
  EndWrite(slot);
  return slot;
}

void LiveSlotSetTransport(LiveSlot* slot, TransportKind kind, FallbackReason reason) {
  if (!slot) return;
  std::lock_guard<std::mutex> lock(ThePage().mu);
  BeginWrite(slot);
  slot->kind = static_cast<uint32_t>(KindIndex(kind));
  slot->reason = static_cast<uint32_t>(reason);
  slot->ring_bytes = 0;
  EndWrite(slot);
  slot->send_ring_fill.store(0, std::memory_order_relaxed);
}

void LiveSlotAddFlags(LiveSlot* slot, uint32_t flags) {
  if (!slot) return;
  std::lock_guard<std::mutex> lock(ThePage().mu);
  BeginWrite(slot);
  slot->flags |= flags;
  EndWrite(slot);
}

void LiveSlotSetFd(LiveSlot* slot, int fd) {
  if (!slot) return;
  std::lock_guard<std::mutex> lock(ThePage().mu);
  BeginWrite(slot);
  slot->fd = fd;
  EndWrite(slot);
}

void LiveSlotClose(LiveSlot* slot) {
  if (!slot) return;
  LiveHeader* header = LiveStatsHeader();
  Page& page = ThePage();
  std::lock_guard<std::mutex> lock(page.mu);
  for (int k = 0; k < kLiveKinds; ++k) {
    uint64_t sent = slot->bytes_sent[k].exchange(0, std::memory_order_relaxed);
    uint64_t received = slot->bytes_received[k].exchange(0, std::memory_order_relaxed);
    if (sent) header->kinds[k].bytes_sent.fetch_add(sent, std::memory_order_relaxed);
    if (received) header->kinds[k].bytes_received.fetch_add(received, std::memory_order_relaxed);
  }
  BeginWrite(slot);
  slot->state = kLiveSlotFree;
  EndWrite(slot);
  page.free_slots.push_back(slot);
}

void LiveStatsSumOpen(uint64_t* sent, uint64_t* received) {
  Page& page = ThePage();
  if (!page.header.load(std::memory_order_acquire)) return;
  // At exit a thread may hold the mutex for ever (it was stopped inside a
  // close): then the sum is read without it, possibly a close off.
  bool locked = false;
  for (int i = 0; i < 1000 && !(locked = page.mu.try_lock()); ++i) ::usleep(100);
  const LiveHeader* header = page.header.load(std::memory_order_acquire);
  uint32_t used = std::min(header->slots_used.load(std::memory_order_acquire),
                           page.chunk_count * kLiveSlotsPerChunk);
  for (uint32_t i = 0; i < used; ++i) {
    const LiveSlot& slot = *SlotAt(page, i);
    if (slot.state != kLiveSlotOpen) continue;
    for (int k = 0; k < kLiveKinds; ++k) {
      sent[k] += slot.bytes_sent[k].load(std::memory_order_relaxed);
      received[k] += slot.bytes_received[k].load(std::memory_order_relaxed);
    }
  }
  if (locked) page.mu.unlock();
}

// Only the process that made the page acts (not a vfork child, which
// shares its parent's memory and must not allocate).
bool IsPageOwner(Page& page) {
  LiveHeader* header = page.header.load(std::memory_order_acquire);
  return header && header->pid == static_cast<int32_t>(::getpid());
}

void LiveStatsBeforeExec() {
  Page& page = ThePage();
  if (!IsPageOwner(page)) return;
  std::lock_guard<std::mutex> lock(page.mu);
  if (!page.file_backed || page.set_aside) return;
  std::string path = PathFor(::getpid(), "");
  if (!path.empty() && ::rename(path.c_str(), (path + ".exec").c_str()) == 0)
    page.set_aside = true;
}

void LiveStatsAfterFailedExec() {
  Page& page = ThePage();
  if (!IsPageOwner(page)) return;
  std::lock_guard<std::mutex> lock(page.mu);
  if (!page.set_aside) return;
  std::string path = PathFor(::getpid(), "");
  if (!path.empty() && ::rename((path + ".exec").c_str(), path.c_str()) == 0)
    page.set_aside = false;
}

}  // namespace vsocket
