// The shared-memory segment of one intra-host connection: a header and two
// rings (client->server, server->client), in a file under
// /dev/shm/vsocket-<uid>/ (directory 0700, file 0600, both owned by the user).
//
// Lifecycle: the client creates the file before its TCP SYN (an "offer"); the
// server opens it when accept() returns the matching TCP connection, claims
// it, and unlinks the name.  From then on the memory lives exactly as long as
// either side keeps it mapped.  A client whose offer is never claimed unlinks
// the name itself.  Names left by crashed processes are reclaimed (their pid
// no longer exists): by the next client that wants the same name, and by
// SweepDeadOffers() at the next offer of any process of the user.
//
// The header is untrusted once the segment is shared: each side copies and
// validates the fields it needs at open time and never re-reads them.
//
// Each ShmSegment keeps the file's descriptor (private range, close-on-exec)
// for as long as it maps it: once the name is gone, that descriptor is the
// only way to hand the memory to a new program image across exec
// (fifo_bridge/shm_handover.cc).
#ifndef VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_
#define VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "fifo_bridge/ring_layout.h"

namespace vsocket::fifo {

inline constexpr uint64_t kSegmentMagic = 0x3147455354534b56ull;  // "VSKTSEG1"
inline constexpr uint32_t kSegmentVersion = 2;  // 2: the move to TCP
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

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t ring_capacity;  // data bytes of each ring
  uint32_t client_pid;
  uint32_t server_pid;
  std::atomic<uint32_t> claim;
};

enum class Direction { kClientToServer = 0, kServerToClient = 1 };

class ShmSegment {
 public:
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Client: creates and maps a new offer named `key`.  Returns 0 or -errno
  // (-EADDRINUSE if a live process holds the name, -EPERM if the directory
  // is not private to this user).
  static int CreateOffer(const std::string& key, uint64_t capacity,
                         std::unique_ptr<ShmSegment>* out);
  // Server: opens and maps the offer `key` in the directory of user
  // `euid`, which must be this process's effective uid (the caller has
  // read it already).  Returns 0, -ENOENT when there is none (peer is not
  // vsocket), or -EINVAL when it fails validation.
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
  // the file, which must be private to this user (or a sealed offer of
  // another user's) and hold a valid, claimed segment.  Takes ownership of `fd` (closed on failure).  Returns 0 or
  // -EINVAL.
  static int AdoptInherited(int fd, std::unique_ptr<ShmSegment>* out);

  // Removes the name; the mapping stays valid.  Idempotent.
  void Unlink();

  // The descriptor of the file (owned by this object), -1 if none.
  int fd() const { return fd_; }

  // A sealed segment (a memfd that another user may map) rather than a
  // file private to this user.
  bool sealed() const { return sealed_; }
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
  // Maps the file and keeps `fd` (moved to the private range) on success.
  static int MapFile(int fd, uint64_t capacity, std::unique_ptr<ShmSegment>* out);
  // Checks ownership (user `euid`, this process's) and mode (or, with
  // `sealed_ok`, a sealed memfd of any owner), header and size, then maps.
  // Keeps `fd` on success; returns 0 or -errno.
  static int ValidateAndMap(int fd, bool sealed_ok, uid_t euid,
                            std::unique_ptr<ShmSegment>* out);
  // Writes a fresh offer's header into a mapped segment.
  void InitOfferHeader(uint64_t capacity);

  std::string path_;
  bool linked_ = false;
  bool sealed_ = false;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t capacity_ = 0;
  SegmentHeader* header_ = nullptr;
};

// Unlinks the files in this user's directory whose client is gone: a valid
// header naming a pid that no longer exists, or a file older than 10 s that
// never got its magic.  Returns how many were removed.  CreateOffer calls it
// (the first offer of a process, then at most every 10 s).  Like the
// stale-name reclaim, it assumes every process of the user that shares
// /dev/shm shares the pid namespace.
size_t SweepDeadOffers();

// Total bytes of a segment whose rings hold `capacity` bytes each.
size_t SegmentBytes(uint64_t capacity);

// The check a server makes on a private copy of an offer's header before it
// maps the file of `file_bytes` bytes: magic, version, header size, ring
// capacity and the file's size.  Pure; the claim word is not looked at.
bool IsValidSegmentHeader(const SegmentHeader& header, uint64_t file_bytes);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SHM_SEGMENT_H_
