// For tests that look for the segment files of their own processes in
// /dev/shm/vsocket-<uid>: that directory is shared with every PID namespace
// that shares /dev/shm (this project's CI root binds the host's /dev;
// host-network containers), where the same pids name other processes.
#ifndef VSOCKET_TESTS_SUPPORT_SEGMENT_OWNER_H_
#define VSOCKET_TESTS_SUPPORT_SEGMENT_OWNER_H_

#include <sys/stat.h>

#include <cstdint>

#include "fifo_bridge/shm_segment.h"

namespace vsocket_test {

// True when the header's client ran in this process's PID namespace (or
// either namespace is unknown).
inline bool MadeInThisPidNamespace(const vsocket::fifo::SegmentHeader& h) {
  struct stat st;
  uint64_t ours = ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
  return h.client_pid_namespace == 0 || ours == 0 || h.client_pid_namespace == ours;
}

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_SEGMENT_OWNER_H_
