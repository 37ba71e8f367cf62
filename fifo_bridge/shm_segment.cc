#include "fifo_bridge/shm_segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include "base/pid_namespace.h"
#include "base/process_id.h"
#include "base/private_directory.h"
#include "base/real_libc.h"
#include "fifo_bridge/segment_fault_guard.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

constexpr size_t kPage = 4096;

size_t RingStride(uint64_t capacity) {
  return (RingBytes(capacity) + kPage - 1) / kPage * kPage;
}

// The directory of user `euid`'s offers.
std::string Directory(uid_t euid) { return ShmDirectory(euid); }

bool ProcessIsGone(uint32_t pid) {
  pid_t owner = static_cast<pid_t>(pid);
  return owner <= 0 || (::kill(owner, 0) != 0 && errno == ESRCH);
}

// The header's pids are numbers of another PID namespace (a container on
// the host network that shares /dev/shm): they cannot be judged from here,
// and the file is left to that namespace's own sweep.
bool OfAnotherPidNamespace(const SegmentHeader& header) {
  return header.client_pid_namespace != 0 && sys::PidNamespaceId() != 0 &&
         header.client_pid_namespace != sys::PidNamespaceId();
}

// Neither side of a valid header will use its name again: each is gone
// or released.  A side that never came (server_pid 0) counts as gone.
bool NobodyUses(const SegmentHeader& header) {
  if (OfAnotherPidNamespace(header)) return false;
  uint32_t released = header.released.load(std::memory_order_relaxed);
  bool client_done = (released & kClientReleased) || ProcessIsGone(header.client_pid);
  bool server_done = (released & kServerReleased) || header.server_pid == 0 ||
                     ProcessIsGone(header.server_pid);
  return client_done && server_done;
}

// A pool's offer name (a symlink) nobody will use again: its text is not
// an offer's, its pool is gone, its slice has moved on to another
// generation, or neither side uses it.  `target` is its text.
bool IsStalePoolName(const std::string& dir, std::string_view target) {
  PoolOfferTarget t;
  if (!ParsePoolOfferTarget(target, &t)) return true;
  int fd = ::open((dir + "/" + t.pool).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  SegmentHeader header;
  ssize_t n = ::pread(fd, &header, sizeof(header),
                      static_cast<off_t>(uint64_t{t.slice} * PoolSliceBytes(t.capacity)));
  sys::close(fd);
  if (n != static_cast<ssize_t>(sizeof(header)) || header.magic != kSegmentMagic ||
      header.slice_generation != t.generation) {
    return true;
  }
  return NobodyUses(header);
}

// The symlink at `path`'s text, or false when it is not one.
bool ReadName(const std::string& path, std::string* target) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
  if (n < 0 || n >= static_cast<ssize_t>(sizeof(buf))) return false;
  target->assign(buf, static_cast<size_t>(n));
  return true;
}

// A name left behind by processes that no longer use it may be reused.
bool IsStale(const std::string& path) {
  std::string target;
  if (ReadName(path, &target)) {
    return IsStalePoolName(path.substr(0, path.rfind('/')), target);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  SegmentHeader header;
  ssize_t n = ::pread(fd, &header, sizeof(header), 0);
  sys::close(fd);
  if (n != static_cast<ssize_t>(sizeof(header))) return true;
  return NobodyUses(header);
}

// The file is sparse: its pages are allocated as data first passes through
// them, and a page the file system cannot allocate then is a SIGBUS in
// whoever touched it.  An offer is made only while /dev/shm has room for
// the whole segment (a tmpfs mounted without a size limit reports no
// blocks).  This cannot reserve the room: a /dev/shm that fills up after
// the connection started is the segment fault guard's to handle
// (segment_fault_guard.h).
bool HasRoomFor(int fd, size_t bytes) {
  struct statvfs vfs;
  if (::fstatvfs(fd, &vfs) != 0 || vfs.f_blocks == 0) return true;
  return vfs.f_frsize == 0 || vfs.f_bavail >= (bytes + vfs.f_frsize - 1) / vfs.f_frsize;
}

int64_t MonotonicSeconds() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec;
}

// A file still being initialised by a live client has no magic yet; only
// one this old without it is taken for the remains of a dead one.
constexpr time_t kIncompleteOfferAgeS = 10;
constexpr int64_t kSweepIntervalS = 10;

// The file open as `fd` is an offer whose client is gone.
bool IsDeadOffer(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return false;
  }
  SegmentHeader header;
  ssize_t n = ::pread(fd, &header, sizeof(header), 0);
  if (n == static_cast<ssize_t>(sizeof(header)) && header.magic == kSegmentMagic) {
    return NobodyUses(header);
  }
  // Incomplete: its owner named itself first (CreateOffer), unless it died
  // before even that.
  if (n == static_cast<ssize_t>(sizeof(header)) && header.client_pid != 0 &&
      !OfAnotherPidNamespace(header) && ProcessIsGone(header.client_pid)) {
    return true;
  }
  return ::time(nullptr) - st.st_mtime > kIncompleteOfferAgeS;
}

}  // namespace

size_t SweepDeadOffers() {
  std::string dir = Directory(::geteuid());
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  size_t removed = 0;
  while (struct dirent* entry = ::readdir(d)) {
    if (entry->d_name[0] == '.') continue;
    // The live statistics pages' directories (live-<pidns>) share it, and
    // older builds' pages (stat-<pid>): they have their own reclaim
    // (vsocket/live_stats.h).
    if (std::strncmp(entry->d_name, "live-", 5) == 0 ||
        std::strncmp(entry->d_name, "stat-", 5) == 0) {
      continue;
    }
    std::string path = dir + "/" + entry->d_name;
    std::string target;
    bool maybe_link = entry->d_type == DT_LNK || entry->d_type == DT_UNKNOWN;
    if (maybe_link && ReadName(path, &target)) {
      // A pool's offer name: unlinked only while it still says the same.
      std::string again;
      if (IsStalePoolName(dir, target) && ReadName(path, &again) && again == target &&
          ::unlink(path.c_str()) == 0) {
        ++removed;
      }
      continue;
    }
    uint32_t owner_pid = 0;
    uint64_t capacity = 0;
    if (ParsePoolName(entry->d_name, &owner_pid, &capacity)) {
      // A pool: dead with its owner (servers that map it keep their
      // mapping).  Its first slice names the owner's PID namespace.
      int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      SegmentHeader header{};
      bool read = ::pread(fd, &header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header));
      sys::close(fd);
      // (A file truncated below one header names no namespace.)
      if (!(read && OfAnotherPidNamespace(header)) && ProcessIsGone(owner_pid) &&
          ::unlink(path.c_str()) == 0) {
        ++removed;
      }
      continue;
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat opened, named;
    // Unlink only the file we looked at, not a live offer that reclaimed
    // the name since.
    if (IsDeadOffer(fd) && ::fstat(fd, &opened) == 0 &&
        ::lstat(path.c_str(), &named) == 0 && opened.st_ino == named.st_ino &&
        opened.st_dev == named.st_dev && ::unlink(path.c_str()) == 0) {
      ++removed;
    }
    sys::close(fd);
  }
  ::closedir(d);
  return removed;
}

size_t SegmentBytes(uint64_t capacity) {
  return kSegmentHeaderBytes + 2 * RingStride(capacity);
}

bool IsValidSegmentHeader(const SegmentHeader& header, uint64_t file_bytes) {
  return header.magic == kSegmentMagic && header.version == kSegmentVersion &&
         header.header_bytes == kSegmentHeaderBytes &&
         IsValidCapacity(header.ring_capacity) &&
         file_bytes == SegmentBytes(header.ring_capacity);
}

ShmSegment::~ShmSegment() {
  if (pooled_) {
    // The pool stays mapped.  The owner queues the slice for reuse; the
    // server's last holder says it no longer touches it.
    if (slice_.owner != nullptr) {
      ReturnPoolSlice(slice_);
    } else {
      if (released_as_ == kServerReleased)
        header_->released.fetch_or(kServerDetached, std::memory_order_acq_rel);
      ReleasePeerPoolSlice(&slice_);  // a dead owner's pool goes with its last slice
    }
  } else if (base_) {
    ::munmap(base_, bytes_);
  }
  if (fd_ >= 0) sys::close(fd_);
}

RingControl* ShmSegment::control(Direction d) const {
  auto* base = static_cast<uint8_t*>(base_) + kSegmentHeaderBytes +
               static_cast<size_t>(d) * RingStride(capacity_);
  return reinterpret_cast<RingControl*>(base);
}

uint8_t* ShmSegment::data(Direction d) const {
  return reinterpret_cast<uint8_t*>(control(d)) + kRingDataOffset;
}

int ShmSegment::MapFile(int fd, uint64_t capacity, bool keep_fd,
                        std::unique_ptr<ShmSegment>* out) {
  size_t bytes = SegmentBytes(capacity);
  InstallSegmentFaultGuard();  // a lost page is a reset, not a SIGBUS
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return -errno;
  std::unique_ptr<ShmSegment> segment(new ShmSegment());
  segment->base_ = base;
  segment->bytes_ = bytes;
  segment->capacity_ = capacity;
  segment->header_ = static_cast<SegmentHeader*>(base);
  if (keep_fd) {
    segment->fd_ = sys::MovePrivate(fd);
  } else {
    sys::close(fd);  // the name is the way back (DescriptorForExec)
  }
  *out = std::move(segment);
  return 0;
}

bool ShmSegment::NameExists(const std::string& key, uid_t euid) {
  // lstat: a pool's offer name is a symlink whose text is no path.
  struct stat st;
  return ::lstat((Directory(euid) + "/" + key).c_str(), &st) == 0;
}

namespace {

// Offers of clients that died before a claim or a revoke (e.g. killed
// inside connect) have nobody left to unlink them: the first offer of
// each process, then one every kSweepIntervalS, removes them.
void SweepWhenDue() {
  static std::atomic<int64_t> next_sweep_s{0};
  int64_t now_s = MonotonicSeconds();
  int64_t due = next_sweep_s.load(std::memory_order_relaxed);
  if (now_s >= due && next_sweep_s.compare_exchange_strong(
                          due, now_s + kSweepIntervalS, std::memory_order_relaxed)) {
    SweepDeadOffers();
  }
}

}  // namespace

int ShmSegment::CreatePoolOffer(const std::string& key, uint64_t capacity,
                                std::unique_ptr<ShmSegment>* out, uid_t euid) {
  SweepWhenDue();
  PoolSlice slice;
  if (int err = AcquirePoolSlice(euid, capacity, &slice)) return err;
  std::unique_ptr<ShmSegment> segment(new ShmSegment());
  segment->pooled_ = true;
  segment->base_ = slice.mapping->slice_base(slice.slice);
  segment->capacity_ = capacity;
  segment->header_ = static_cast<SegmentHeader*>(segment->base_);
  segment->target_ = FormatPoolOfferTarget(slice.mapping->name(), slice.slice, slice.generation);
  segment->slice_ = std::move(slice);
  // The header first: a server that finds the name finds the offer.
  segment->InitOfferHeader(capacity);
  std::string dir = Directory(euid);
  std::string path = dir + "/" + key;
  for (int attempt = 0;; ++attempt) {
    if (::symlink(segment->target_.c_str(), path.c_str()) == 0) break;
    // The segment's destructor queues the slice again (never claimed).
    if (attempt >= 2 || errno != EEXIST || !IsStale(path)) return -EADDRINUSE;
    ::unlink(path.c_str());
  }
  segment->path_ = path;
  segment->linked_ = true;
  segment->own_name_ = true;
  *out = std::move(segment);
  return 0;
}

int ShmSegment::OpenPoolOffer(const std::string& path, std::string_view target, uid_t euid,
                              std::unique_ptr<ShmSegment>* out) {
  PoolOfferTarget t;
  if (!ParsePoolOfferTarget(target, &t)) return -EINVAL;
  std::shared_ptr<PoolMapping> mapping;
  int err = MapPeerPool(t.pool, euid, &mapping);
  // The name was there: a pool that is not is a bad offer, not no offer.
  if (err == -ENOENT) err = -EINVAL;
  if (err != 0) return err;
  if (t.slice >= mapping->slices()) return -EINVAL;
  // A private copy of the untrusted header.
  SegmentHeader header;
  std::memcpy(static_cast<void*>(&header), mapping->slice_base(t.slice), sizeof(header));
  if (!IsValidSegmentHeader(header, mapping->slice_bytes()) ||
      header.ring_capacity != t.capacity || header.slice_generation != t.generation) {
    return -EINVAL;
  }
  std::unique_ptr<ShmSegment> segment(new ShmSegment());
  segment->pooled_ = true;
  segment->base_ = mapping->slice_base(t.slice);
  segment->capacity_ = t.capacity;
  segment->header_ = static_cast<SegmentHeader*>(segment->base_);
  segment->slice_.slice = t.slice;
  segment->slice_.generation = t.generation;
  segment->slice_.mapping = std::move(mapping);
  segment->target_.assign(target);
  segment->path_ = path;
  segment->linked_ = true;
  *out = std::move(segment);
  return 0;
}

int ShmSegment::CreateOffer(const std::string& key, uint64_t capacity,
                            std::unique_ptr<ShmSegment>* out, uid_t euid, bool pooled) {
  if (!IsValidCapacity(capacity)) return -EINVAL;
  if (pooled) return CreatePoolOffer(key, capacity, out, euid);
  std::string dir = Directory(euid);
  if (int err = sys::EnsurePrivateDirectory(dir, euid)) return err;
  SweepWhenDue();
  std::string path = dir + "/" + key;
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd >= 0) break;
    if (errno != EEXIST) return -errno;
    if (attempt > 0 || !IsStale(path)) return -EADDRINUSE;
    ::unlink(path.c_str());
  }
  if (fd < 0) return -EADDRINUSE;
  // Name the owner at once (the magic still 0: InitOfferHeader writes it
  // last): a client killed before InitOfferHeader would otherwise leave a
  // file the sweep may take only once it is kIncompleteOfferAgeS old (the
  // kill loop hit that window).
  SegmentHeader owner{};
  owner.client_pid = static_cast<uint32_t>(::getpid());
  owner.client_pid_namespace = sys::PidNamespaceId();
  int err = 0;
  if (::pwrite(fd, &owner, sizeof(owner), 0) != static_cast<ssize_t>(sizeof(owner))) {
    err = errno ? -errno : -ENOSPC;
  } else if (!HasRoomFor(fd, SegmentBytes(capacity))) {
    err = -ENOSPC;
  } else if (::ftruncate(fd, static_cast<off_t>(SegmentBytes(capacity))) != 0) {
    err = -errno;
  } else {
    // The client's name is safe to unlink without an identity check: its
    // bound port keeps any other offer from taking the key meanwhile.
    err = MapFile(fd, capacity, /*keep_fd=*/false, out);
  }
  if (err != 0) {
    sys::close(fd);
    ::unlink(path.c_str());
    return err;
  }
  ShmSegment* segment = out->get();
  segment->path_ = path;
  segment->linked_ = true;
  segment->InitOfferHeader(capacity);
  return 0;
}

int ShmSegment::CreateSealedOffer(uint64_t capacity,
                                  std::unique_ptr<ShmSegment>* out) {
  if (!IsValidCapacity(capacity)) return -EINVAL;
  int fd = ::memfd_create("vsocket-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  int err = 0;
  if (::ftruncate(fd, static_cast<off_t>(SegmentBytes(capacity))) != 0 ||
      sys::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    err = -errno;
  } else {
    err = MapFile(fd, capacity, /*keep_fd=*/true, out);
  }
  if (err != 0) {
    sys::close(fd);
    return err;
  }
  (*out)->sealed_ = true;
  (*out)->InitOfferHeader(capacity);
  return 0;
}

int ShmSegment::AdoptHandedOffer(int fd, std::unique_ptr<ShmSegment>* out) {
  int err = ValidateAndMap(fd, /*sealed_ok=*/true, ::geteuid(), out);
  if (err != 0) sys::close(fd);
  // Handed over by descriptor: whoever made it, its sides keep their state
  // out of it, whatever its mode says.
  if (err == 0) (*out)->sealed_ = true;
  return err;
}

bool ShmSegment::ClientInThisPidNamespace() const {
  return !OfAnotherPidNamespace(*header_);
}

void ShmSegment::InitOfferHeader(uint64_t capacity) {
  SegmentHeader* header = header_;
  header->version = kSegmentVersion;
  header->header_bytes = kSegmentHeaderBytes;
  header->ring_capacity = capacity;
  // A named offer's file has its owner already (CreateOffer).
  if (header->client_pid == 0) {
    header->client_pid = static_cast<uint32_t>(sys::ThisProcessId());
    header->client_pid_namespace = sys::PidNamespaceId();
  }
  header->server_pid = 0;
  header->slice_generation = pooled_ ? slice_.generation : 0;
  header->released.store(0, std::memory_order_relaxed);
  header->claim.store(kOffered, std::memory_order_relaxed);
  for (Direction d : {Direction::kClientToServer, Direction::kServerToClient}) {
    RingControl* ring = control(d);
    ring->reader_wake.store(kReaderArmed, std::memory_order_relaxed);
  }
  // The magic goes last: a server that sees it sees an initialised header.
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kSegmentMagic;
}

int ShmSegment::ValidateAndMap(int fd, bool sealed_ok, uid_t euid,
                               std::unique_ptr<ShmSegment>* out) {
  struct stat st;
  SegmentHeader header;
  if (::fstat(fd, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EPERM;
  bool private_file = st.st_uid == euid && (st.st_mode & 077) == 0;
  if (!private_file) {
    // Another user's memory: only if nobody can change its size under us
    // (a mapping touched past a shrunk end raises SIGBUS).
    constexpr int kNeeded = F_SEAL_SHRINK | F_SEAL_GROW;
    int seals = sealed_ok ? sys::fcntl(fd, F_GET_SEALS) : -1;
    if (seals < 0 || (seals & kNeeded) != kNeeded) return -EPERM;
  }
  if (::pread(fd, &header, sizeof(header), 0) !=
      static_cast<ssize_t>(sizeof(header))) {
    return -EINVAL;
  }
  if (!IsValidSegmentHeader(header, static_cast<uint64_t>(st.st_size)))
    return -EINVAL;
  // Kept whenever the caller has no name to come back by (sealed_ok).
  int err = MapFile(fd, header.ring_capacity,
                    /*keep_fd=*/sealed_ok || !private_file, out);
  if (err == 0) {
    (*out)->sealed_ = !private_file;
    (*out)->dev_ = st.st_dev;
    (*out)->ino_ = st.st_ino;
  }
  return err;
}

int ShmSegment::OpenOffer(const std::string& key, uid_t euid,
                          std::unique_ptr<ShmSegment>* out) {
  std::string path = Directory(euid) + "/" + key;
  // A pool's slice (the default) is named by a symlink whose text says
  // which: one readlink.  A segment's own file (VSOCKET_SHM_POOL=0, sealed
  // offers have no name) is no symlink (EINVAL): then it opens, with
  // O_NOFOLLOW (a symlink put there meanwhile is refused, ELOOP).
  // (Pools first: the other order cost a pooled claim a failed open.)
  char target[256];
  ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
  if (n >= static_cast<ssize_t>(sizeof(target))) return -EINVAL;
  if (n >= 0)
    return OpenPoolOffer(path, std::string_view(target, static_cast<size_t>(n)), euid, out);
  if (errno != EINVAL) return -errno;  // ENOENT: no offer
  int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ELOOP ? -EINVAL : -errno;
  int err = ValidateAndMap(fd, /*sealed_ok=*/false, euid, out);
  if (err != 0) {
    sys::close(fd);
    return err;
  }
  (*out)->path_ = path;
  (*out)->linked_ = true;
  return 0;
}

int ShmSegment::AdoptInherited(int fd, const std::string& key,
                               std::unique_ptr<ShmSegment>* out) {
  int flags = sys::fcntl(fd, F_GETFL);
  std::string target;
  if (!key.empty() && ReadName(Directory(::geteuid()) + "/" + key, &target)) {
    // A pool's slice: the name says which; `fd` must be that pool.
    std::unique_ptr<ShmSegment> segment;
    struct stat st;
    bool ok = flags >= 0 && (flags & O_ACCMODE) == O_RDWR && ::fstat(fd, &st) == 0 &&
              OpenPoolOffer(Directory(::geteuid()) + "/" + key, target, ::geteuid(),
                            &segment) == 0 &&
              segment->slice_.mapping->dev() == st.st_dev &&
              segment->slice_.mapping->ino() == st.st_ino &&
              segment->header_->claim.load(std::memory_order_acquire) == kClaimed;
    sys::close(fd);  // the name and the cached mapping hold it
    if (!ok) return -EINVAL;
    *out = std::move(segment);
    return 0;
  }
  std::unique_ptr<ShmSegment> segment;
  if (flags < 0 || (flags & O_ACCMODE) != O_RDWR ||
      ValidateAndMap(fd, /*sealed_ok=*/true, ::geteuid(), &segment) != 0) {
    sys::close(fd);
    return -EINVAL;
  }
  if (!segment->sealed_ && !key.empty()) {
    // A private file whose name still names it: held by the name, as any
    // other named segment.  Unlinked already (its peer died): keep `fd`.
    segment->path_ = Directory(::geteuid()) + "/" + key;
    if (segment->NamesThisFile()) {
      segment->linked_ = true;
      sys::close(segment->fd_);
      segment->fd_ = -1;
    }
  }
  if (segment->header_->claim.load(std::memory_order_acquire) != kClaimed)
    return -EINVAL;  // the segment's destructor closes what it holds
  *out = std::move(segment);
  return 0;
}

bool ShmSegment::NamesThisFile() const {
  if (pooled_) {
    std::string target;
    return own_name_ || (ReadName(path_, &target) && target == target_);
  }
  if (ino_ == 0) return true;  // the client's own name (CreateOffer)
  struct stat named;
  return ::lstat(path_.c_str(), &named) == 0 && named.st_dev == dev_ &&
         named.st_ino == ino_;
}

void ShmSegment::Unlink() {
  if (linked_) {
    if (NamesThisFile()) ::unlink(path_.c_str());
    linked_ = false;
  }
}

void ShmSegment::NotePeerExited() {
  if (!pooled_ || slice_.owner != nullptr || !slice_.mapping) return;
  if (OfAnotherPidNamespace(*header_)) return;
  slice_.mapping->MarkOwnerMayHaveExited();
}

void ShmSegment::ReleaseName(bool client, bool peer_gone) {
  uint32_t mine = client ? kClientReleased : kServerReleased;
  uint32_t peer = client ? kServerReleased : kClientReleased;
  uint32_t before = header_->released.fetch_or(mine, std::memory_order_acq_rel);
  released_as_ = mine;
  if ((before & peer) || peer_gone) Unlink();
}

int ShmSegment::DescriptorForExec() {
  if (fd_ >= 0 || !linked_) return fd_;
  if (pooled_) {
    // The pool's file, opened again by its name: the new image finds the
    // slice by the symlink (AdoptInherited).
    std::string pool = path_.substr(0, path_.rfind('/') + 1) + slice_.mapping->name();
    int fd = ::open(pool.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_dev != slice_.mapping->dev() ||
        st.st_ino != slice_.mapping->ino()) {
      sys::close(fd);
      return -1;
    }
    fd_ = sys::MovePrivate(fd);
    return fd_;
  }
  int fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || (ino_ != 0 && (st.st_dev != dev_ || st.st_ino != ino_))) {
    sys::close(fd);
    return -1;
  }
  fd_ = sys::MovePrivate(fd);
  return fd_;
}

}  // namespace vsocket::fifo
