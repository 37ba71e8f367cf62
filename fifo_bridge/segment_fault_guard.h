// A shared-memory segment that loses its pages (the peer, a process of the
// same user, truncates the file, or /dev/shm fills up under a sparse file)
// resets that one connection instead of killing the program with SIGBUS.
// The SIGBUS machinery is base/shared_file_fault_guard.h; this is the
// segment's recoverer:
//
//  - a mapping of /dev/shm/vsocket-* at offset 0 whose size is a segment's
//    (header + two rings of whole pages) is replaced by private zero pages
//    (MAP_FIXED); RESET is set in both ring control blocks and the claim
//    word to CLAIMED, so the connection's next call returns ECONNRESET (the
//    ring code already treats RESET and impossible indices so;
//    ShmTransport::ReadOnce re-checks RESET after copying, so zeros are
//    never delivered as data -- except through an in-place view
//    (vsocket_recv_inplace) the program holds while the pages go).
//
//  - a mapping of a pool (a file named pool-*, shm_pool.h) gets the same
//    for every slice it covers (RecoverPoolMapping): every connection of
//    that pool is reset, and the pool is marked lost (no new offer uses
//    it); other pools' mappings are other lines of /proc/self/maps and
//    are not touched.
//
// Who installs: ShmSegment and the pools, at the first mapping.
#ifndef VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_
#define VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_

namespace vsocket::fifo {

// Registers the segment recoverer and installs the SIGBUS guard, once per
// process; later calls return at once.  Thread-safe.
void InstallSegmentFaultGuard();

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_SEGMENT_FAULT_GUARD_H_
