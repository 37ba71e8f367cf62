// The shared-memory segment of one intra-host connection: a header and two
// rings (client->server, server->client), in a file under
// /dev/shm/vsocket-<uid>/ (directory 0700, file 0600, both owned by the user).
//
// Lifecycle: the client creates the file before its TCP SYN (an "offer"); the
// server opens it when accept() returns the matching TCP connection and
// claims it.  The name stays while the connection does: it is how either
// side hands the memory to a new program image across exec
// (fifo_bridge/shm_handover.cc), so neither keeps the file open.  Each side
// marks its release in the header (ReleaseName); the second to release, or
// a side whose peer died, unlinks the name.  A client whose offer is never
// claimed unlinks the name itself.  Names left by crashed processes (each
// side gone or released) are reclaimed by the next client that wants the
// same name, and by SweepDeadOffers() at the next offer of any process of
// the user.  Its pages live while the name does or either side maps it.
//
// The header is untrusted once the segment is shared: each side copies and
// validates the fields it needs at open time and never re-reads them.
//
// A sealed segment (shared with another user) has no name: its ShmSegment
// keeps the descriptor (private range, close-on-exec) for as long as it
// maps it, the only way to hand it on.
#ifndef VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_
#define VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_pool.h"

namespace vsocket::fifo {

inline constexpr uint64_t kSegmentMagic = 0x3147455354534b56ull;  // "VSKTSEG1"
// 2: the move to TCP; 3: names live until release; 4: the client pid
// namespace; 5: RingControl::written (held sends a reader takes at the
// writer's death); 6: slices of pools (SegmentHeader::slice_generation,
// the kServerDetached released bit: shm_pool.h)
inline constexpr uint32_t kSegmentVersion = 6;
inline constexpr size_t kSegmentHeaderBytes = 4096;
// The header page also holds one slot per side for that side's SideState
// (side_state.h), written only by the processes of that side.
inline constexpr size_t kSideStateSlotBytes = 1024;
inline constexpr size_t kClientSideStateSlot = 1024;  // offsets in the page
inline constexpr size_t kServerSideStateSlot = 2048;

// SegmentHeader::claim values.
inline constexpr uint32_t kOffered = 1;   // written by the client at creation
inline constexpr uint32_t kClaimed = 2;   // CAS by the server in accept()
inline constexpr uint32_t kRevoked = 3;   // CAS by the client: use TCP
// CAS from kClaimed by the side that moves a claimed connection to its TCP
// connection (shm_move_to_tcp.cc): it stopped both its rings at that moment.
inline constexpr uint32_t kMovedByClient = 4;
inline constexpr uint32_t kMovedByServer = 5;

// A claim was made (the connection may have moved to TCP since).
inline constexpr bool ClaimWasMade(uint32_t claim) {
  return claim == kClaimed || claim == kMovedByClient || claim == kMovedByServer;
}

// SegmentHeader::released bits: that side's last holder has released it.
inline constexpr uint32_t kClientReleased = 1;
inline constexpr uint32_t kServerReleased = 2;

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t ring_capacity;  // data bytes of each ring
  uint32_t client_pid;
  uint32_t server_pid;
  std::atomic<uint32_t> claim;
  std::atomic<uint32_t> released;  // fetch_or by each side's last release
  // The client's PID namespace (base/pid_namespace.h), 0 if unknown;
  // written with client_pid.  A server of another one declines the offer:
  // the pids in this header would name other processes there.
  uint64_t client_pid_namespace;
  // A pool's slice (shm_pool.h): its reuse count, which the offer's name
  // repeats; 0 in a segment of its own.
  uint32_t slice_generation;
  uint32_t reserved;
};

enum class Direction { kClientToServer = 0, kServerToClient = 1 };

class ShmSegment {
 public:
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Whether an offer named `key` exists (in use or stale) for the user
  // `euid` (ours: a caller that knows it saves a geteuid per port tried).
  // One lstat() call (a pool's offer is a symlink whose text is no path).
  static bool NameExists(const std::string& key, uid_t euid = ::geteuid());

  // Client: creates and maps a new offer named `key`.  Returns 0 or -errno
  // (-EADDRINUSE if a live process holds the name, -EPERM if the directory
  // is not private to this user).  With `pooled`, the offer is a slice of
  // this process's pool (shm_pool.h) and its name a symlink to
  // "<pool>#<slice>#<generation>"; else a file of its own.
  // REQUIRES: `euid` is this process's effective uid.
  static int CreateOffer(const std::string& key, uint64_t capacity,
                         std::unique_ptr<ShmSegment>* out, uid_t euid = ::geteuid(),
                         bool pooled = false);
  // Server: opens and maps the offer `key` in the directory of user
  // `euid`, which must be this process's effective uid (the caller has
  // read it already).  Returns 0, -ENOENT when there is none (peer is not
  // vsocket), or -EINVAL when it fails validation.  A symlink names a pool's
  // slice: its text is parsed strictly (ParsePoolOfferTarget), the pool
  // mapped once per process (MapPeerPool) and the slice's header checked,
  // its generation the name's.
  static int OpenOffer(const std::string& key, uid_t euid,
                       std::unique_ptr<ShmSegment>* out);
  static int OpenOffer(const std::string& key, std::unique_ptr<ShmSegment>* out) {
    return OpenOffer(key, ::geteuid(), out);
  }
  // Client, when sharing with other users (sharing_policy.h): an offer with
  // no name, in a memfd sealed against shrinking and growing, so that no
  // peer can make the other's next touch of the mapping fault.  It reaches
  // the server only as a descriptor (offer_hand_out.h).  Returns 0 or -errno.
  static int CreateSealedOffer(uint64_t capacity, std::unique_ptr<ShmSegment>* out);
  // Server: maps a sealed offer received as `fd` (any owner; the seals, the
  // size and the header are checked).  Takes ownership of `fd` (closed on
  // failure).  Returns 0, or -EINVAL when it fails validation.
  static int AdoptHandedOffer(int fd, std::unique_ptr<ShmSegment>* out);

  // A segment handed over across exec: `fd` is the inherited descriptor of
  // the file (or of the pool, whose slice the symlink `key` still names), which must be private to this user (or a sealed offer of
  // another user's) and hold a valid, claimed segment.  `key` is the
  // connection's: while the name still names this file, the descriptor is
  // closed and the name kept, as for any other named segment.  Takes
  // ownership of `fd` (closed on failure).  Returns 0 or -EINVAL.
  static int AdoptInherited(int fd, const std::string& key,
                            std::unique_ptr<ShmSegment>* out);

  // False when the header names a client PID namespace other than ours
  // (base/pid_namespace.h); true when either is unknown.
  bool ClientInThisPidNamespace() const;

  // Removes the name if it still names this segment's file; the mapping
  // stays valid.  Idempotent.
  void Unlink();
  // This side's last holder is done with the segment: marks it in the
  // header and unlinks the name when the peer released first or is known to
  // be gone (`peer_gone`).  Any thread; once per side.
  void ReleaseName(bool client, bool peer_gone);
  // The peer's process left without a close (the liveness connection's
  // end).  On a server of a pool's slice, marks the mapping
  // (PoolMapping::MarkOwnerMayHaveExited): the release of the process's
  // last slice of it then checks the owner and, if it has exited, unmaps
  // the pool and unlinks its file (ReleasePeerPoolSlice).  No-op otherwise,
  // and for an owner of another PID namespace.  Any thread.
  void NotePeerExited();

  // The descriptor the segment is held by (owned by this object), -1 if
  // none: a sealed segment keeps one, a named one only once
  // DescriptorForExec() opened it.
  int fd() const { return fd_; }
  // A descriptor of the file for a new program image: fd(), or the name
  // opened again (checked to be the same file, kept as fd() from then on).
  // -1 when neither is there.
  int DescriptorForExec();

  // A sealed segment (a memfd that another user may map) rather than a
  // file private to this user.
  bool sealed() const { return sealed_; }
  // A slice of a pool rather than a file of its own.
  bool pooled() const { return pooled_; }
  const PoolSlice& pool_slice() const { return slice_; }
  // The slot of the header page for one side's SideState, kSideStateSlotBytes
  // long.  REQUIRES: !sealed(): another user's process must not share a page
  // with our locks.
  void* side_state_slot(bool client) const {
    return static_cast<uint8_t*>(base_) +
           (client ? kClientSideStateSlot : kServerSideStateSlot);
  }

  SegmentHeader* header() const { return header_; }
  uint64_t capacity() const { return capacity_; }
  RingControl* control(Direction d) const;
  uint8_t* data(Direction d) const;

 private:
  ShmSegment() = default;
  // Maps the file.  On success, keeps `fd` (moved to the private range)
  // when `keep_fd`, else closes it; on failure, leaves it to the caller.
  static int MapFile(int fd, uint64_t capacity, bool keep_fd,
                     std::unique_ptr<ShmSegment>* out);
  // Checks ownership (user `euid`, this process's) and mode (or, with
  // `sealed_ok`, a sealed memfd of any owner), header and size, then maps.
  // On success keeps `fd` when `sealed_ok` (the caller has no name to come
  // back by) or the file is not private, else closes it; remembers its
  // inode.  Returns 0 or -errno (`fd` left to the caller).
  static int ValidateAndMap(int fd, bool sealed_ok, uid_t euid,
                            std::unique_ptr<ShmSegment>* out);
  // path_ names this segment's file (always true when the inode is not
  // known: the client's own offer).
  bool NamesThisFile() const;
  // Writes a fresh offer's header into a mapped segment.
  void InitOfferHeader(uint64_t capacity);
  // CreateOffer and OpenOffer for a pool's slice.
  static int CreatePoolOffer(const std::string& key, uint64_t capacity,
                             std::unique_ptr<ShmSegment>* out, uid_t euid);
  static int OpenPoolOffer(const std::string& path, std::string_view target, uid_t euid,
                           std::unique_ptr<ShmSegment>* out);

  std::string path_;
  bool linked_ = false;
  bool sealed_ = false;
  int fd_ = -1;
  // The file's identity (st_dev, st_ino), when known: Unlink and
  // DescriptorForExec touch the name only while it names this file.
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t capacity_ = 0;
  SegmentHeader* header_ = nullptr;
  // A pool's slice: the mapping is the pool's (never unmapped here), the
  // name a symlink whose text is target_.
  bool pooled_ = false;
  PoolSlice slice_;
  std::string target_;
  bool own_name_ = false;        // the client's: its port guards the key
  uint32_t released_as_ = 0;     // the released bit ReleaseName set, if any
};

// Unlinks the files in this user's directory that nobody will use again:
// a valid header whose client and server are each gone (a pid that no
// longer exists) or released (SegmentHeader::released), or a file older
// than 10 s that never got its magic.  Returns how many were removed.
// CreateOffer calls it (the first offer of a process, then at most every
// 10 s).  Like the stale-name reclaim, it leaves alone the files of clients
// of another PID namespace that shares /dev/shm: their pids are not ours
// to test.
size_t SweepDeadOffers();

// Total bytes of a segment whose rings hold `capacity` bytes each.
size_t SegmentBytes(uint64_t capacity);

// The check a server makes on a private copy of an offer's header before it
// maps the file of `file_bytes` bytes: magic, version, header size, ring
// capacity and the file's size.  Pure; the claim word is not looked at.
bool IsValidSegmentHeader(const SegmentHeader& header, uint64_t file_bytes);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_
