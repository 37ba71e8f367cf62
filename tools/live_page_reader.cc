#include "tools/live_page_reader.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "vsocket/live_stats_layout.h"

namespace vsocket_stat {
namespace {

using vsocket::LiveAddress;
using vsocket::LiveHeader;
using vsocket::LiveSlot;

uint64_t MonotonicNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Field 22 of /proc/<pid>/stat; 0 when unreadable.
uint64_t StartTicks(int pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  int field = 2;
  for (++p; *p && field < 22; ++p) {
    if (*p == ' ') ++field;
  }
  return std::strtoull(p, nullptr, 10);
}

bool Alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// A NUL-terminated copy of a fixed-size text field.
std::string Text(const char* field, size_t size) {
  return std::string(field, strnlen(field, size));
}

std::string FormatAddress(const LiveAddress& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.family == AF_INET) {
    ::inet_ntop(AF_INET, a.addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(a.port);
  }
  if (a.family == AF_INET6) {
    ::inet_ntop(AF_INET6, a.addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(a.port);
  }
  return "?";
}

// The identity part of a slot, copied under its seqlock.
struct Identity {
  uint32_t state, kind, reason, flags, rule_line, ring_bytes;
  int32_t fd;
  uint64_t opened_ns;
  LiveAddress local, peer;
};

// The identity of a slot as the first read of the page saw it, when the
// second read saw the same even seqlock and the same bytes: a write that
// overlapped the first read changes one or the other.  Otherwise the slot
// is being rewritten: leave it out this round.
bool CopyIdentity(const LiveSlot& first, const LiveSlot& second, Identity* out) {
  uint32_t seq = first.seq.load(std::memory_order_relaxed);
  if ((seq & 1u) || seq != second.seq.load(std::memory_order_relaxed) ||
      std::memcmp(&first, &second, offsetof(LiveSlot, pad0)) != 0) {
    return false;
  }
  out->state = first.state;
  out->kind = first.kind;
  out->reason = first.reason;
  out->flags = first.flags;
  out->rule_line = first.rule_line;
  out->ring_bytes = first.ring_bytes;
  out->fd = first.fd;
  out->opened_ns = first.opened_ns;
  out->local = first.local;
  out->peer = first.peer;
  return true;
}

// A private copy of a page file, aligned for its structures.
struct PageCopy {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> bytes;
};

// Reads `size` bytes of the file into *out.  False with *why when it has
// fewer now (truncated since it was measured) or cannot be read.
bool ReadCopy(int fd, size_t size, PageCopy* out, std::string* why) {
  size_t rounded = (size + alignof(LiveSlot) - 1) / alignof(LiveSlot) * alignof(LiveSlot);
  out->bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(alignof(LiveSlot), rounded)));
  if (!out->bytes) {
    *why = "out of memory";
    return false;
  }
  for (size_t done = 0; done < size;) {
    ssize_t n = ::pread(fd, out->bytes.get() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::string("read: ") + std::strerror(errno);
      return false;
    }
    if (n == 0) {
      *why = "truncated while read";
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string StateName(uint32_t flags) {
  bool rd = flags & vsocket::kLiveShutRead, wr = flags & vsocket::kLiveShutWrite;
  if (rd && wr) return "shut_rdwr";
  if (wr) return "shut_wr";
  if (rd) return "shut_rd";
  return "established";
}

// Parses "stat-<pid>" (suffix: "", ".exec" or ".new"); 0 if not one.
int PidOfName(const char* name, std::string* suffix) {
  if (std::strncmp(name, "stat-", 5) != 0) return 0;
  char* end = nullptr;
  long pid = std::strtol(name + 5, &end, 10);
  if (end == name + 5 || pid <= 0 || pid > (1l << 22)) return 0;
  *suffix = end;
  if (!suffix->empty() && *suffix != ".exec" && *suffix != ".new") return 0;
  return static_cast<int>(pid);
}

}  // namespace

std::string UserDirectory() {
  // The writers' directory for our PID namespace (vsocket/live_stats.cc,
  // LiveStatsDirectory): the inode of /proc/self/ns/pid, 0 without /proc.
  struct stat st;
  unsigned long long pid_namespace =
      ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
  char sub[32];
  std::snprintf(sub, sizeof(sub), "/live-%llx", pid_namespace);
  return "/dev/shm/vsocket-" + std::to_string(::geteuid()) + sub;
}

bool ReadPage(const std::string& path, Process* out, std::string* why, bool* stale) {
  *stale = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("open: ") + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      static_cast<size_t>(st.st_size) < vsocket::kLiveHeaderBytes) {
    ::close(fd);
    *why = "not a page (type, owner or size)";
    return false;
  }
  // Read, not mapped: a page truncated by another process meanwhile is a
  // short read here, where a mapping would die of SIGBUS.  Read twice, so
  // that slots being rewritten can be told (CopyIdentity).
  size_t size = static_cast<size_t>(st.st_size);
  PageCopy first, second;
  bool read = ReadCopy(fd, size, &first, why) && ReadCopy(fd, size, &second, why);
  ::close(fd);
  if (!read) return false;
  const uint8_t* page = first.bytes.get();
  const auto* h = reinterpret_cast<const LiveHeader*>(page);
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != vsocket::kLiveMagic ||
      h->version != vsocket::kLiveVersion ||
      h->header_bytes != vsocket::kLiveHeaderBytes ||
      h->slot_bytes != vsocket::kLiveSlotBytes ||
      h->slots_per_chunk != vsocket::kLiveSlotsPerChunk) {
    *why = "unknown layout (magic or version)";
    return false;
  }
  int pid = h->pid;
  uint64_t ticks = h->start_ticks;
  if (!Alive(pid) || (ticks != 0 && StartTicks(pid) != 0 && StartTicks(pid) != ticks)) {
    *stale = true;
    *why = "its process is gone";
    return false;
  }
  uint64_t now = MonotonicNs();
  out->pid = pid;
  out->program = Text(h->program, sizeof(h->program));
  out->rules_file = Text(h->rules_file, sizeof(h->rules_file));
  out->age_s = now > h->created_ns ? (now - h->created_ns) / 1e9 : 0;
  std::string kinds[vsocket::kLiveKinds];
  for (int k = 0; k < vsocket::kLiveKinds; ++k) {
    kinds[k] = Text(h->kind_names[k], sizeof(h->kind_names[k]));
    if (kinds[k].empty()) kinds[k] = "kind" + std::to_string(k);
  }
  auto reason_name = [&](uint32_t r) -> std::string {
    if (r == 0) return "";
    if (r >= static_cast<uint32_t>(vsocket::kLiveReasons)) return "unknown";
    std::string name = Text(h->reason_names[r], vsocket::kLiveNameBytes);
    return name.empty() ? "reason" + std::to_string(r) : name;
  };
  uint64_t open_sent[vsocket::kLiveKinds] = {}, open_received[vsocket::kLiveKinds] = {};
  uint32_t chunks = std::min<uint64_t>(
      h->chunks.load(std::memory_order_acquire),
      (size - vsocket::kLiveHeaderBytes) / vsocket::kLiveChunkBytes);
  chunks = std::min(chunks, vsocket::kLiveMaxChunks);
  const uint8_t* base = page + vsocket::kLiveHeaderBytes;
  const uint8_t* base_again = second.bytes.get() + vsocket::kLiveHeaderBytes;
  uint32_t slots = std::min(h->slots_used.load(std::memory_order_acquire),
                            chunks * vsocket::kLiveSlotsPerChunk);
  for (uint32_t i = 0; i < slots; ++i) {
    const auto& slot = *reinterpret_cast<const LiveSlot*>(base + i * vsocket::kLiveSlotBytes);
    const auto& again =
        *reinterpret_cast<const LiveSlot*>(base_again + i * vsocket::kLiveSlotBytes);
    Identity id;
    if (!CopyIdentity(slot, again, &id) || id.state != vsocket::kLiveSlotOpen) continue;
    Connection c;
    c.fd = id.fd;
    c.role = (id.flags & vsocket::kLiveAccepted) ? "server" : "client";
    c.local = FormatAddress(id.local);
    c.peer = FormatAddress(id.peer);
    c.transport = id.kind < static_cast<uint32_t>(vsocket::kLiveKinds) ? kinds[id.kind] : "unknown";
    c.fallback_reason = reason_name(id.reason);
    c.rule_line = id.rule_line;
    c.state = StateName(id.flags);
    c.age_s = now > id.opened_ns ? (now - id.opened_ns) / 1e9 : 0;
    for (int k = 0; k < vsocket::kLiveKinds; ++k) {
      uint64_t s = slot.bytes_sent[k].load(std::memory_order_relaxed);
      uint64_t r = slot.bytes_received[k].load(std::memory_order_relaxed);
      c.bytes_sent += s;
      c.bytes_received += r;
      open_sent[k] += s;
      open_received[k] += r;
    }
    c.ring_bytes = id.ring_bytes;
    if (c.ring_bytes) {
      c.ring_fill = std::min<uint64_t>(slot.send_ring_fill.load(std::memory_order_relaxed),
                                       c.ring_bytes);
    }
    out->connections.push_back(c);
  }
  std::sort(out->connections.begin(), out->connections.end(),
            [](const Connection& a, const Connection& b) { return a.fd < b.fd; });
  for (int k = 0; k < vsocket::kLiveKinds; ++k) {
    Traffic t;
    t.connections = h->kinds[k].connections.load(std::memory_order_relaxed);
    t.bytes_sent = h->kinds[k].bytes_sent.load(std::memory_order_relaxed) + open_sent[k];
    t.bytes_received =
        h->kinds[k].bytes_received.load(std::memory_order_relaxed) + open_received[k];
    if (t.connections || t.bytes_sent || t.bytes_received) out->transports[kinds[k]] = t;
  }
  for (uint32_t r = 1; r < static_cast<uint32_t>(vsocket::kLiveReasons); ++r) {
    uint64_t n = h->reasons[r].load(std::memory_order_relaxed);
    if (n) out->fallback_reasons[reason_name(r)] = n;
  }
  out->unlisted = h->unlisted.load(std::memory_order_relaxed);
  return true;
}

std::vector<Process> ReadPages(const std::string& dir, int only_pid, bool remove_stale) {
  std::vector<Process> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string suffix;
    int pid = PidOfName(e->d_name, &suffix);
    if (pid == 0) continue;
    std::string path = dir + "/" + e->d_name;
    if (!suffix.empty()) {
      // Set aside across an exec, or being made: only a dead owner's goes.
      if (remove_stale && !Alive(pid)) ::unlink(path.c_str());
      continue;
    }
    if (only_pid > 0 && pid != only_pid) continue;
    Process p;
    std::string why;
    bool stale = false;
    if (ReadPage(path, &p, &why, &stale) && p.pid == pid) {
      out.push_back(std::move(p));
    } else if (stale && remove_stale) {
      ::unlink(path.c_str());
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const Process& a, const Process& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace vsocket_stat
