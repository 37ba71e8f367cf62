// The program started an io_uring instance (interpose_io_uring.cc): from
// then on the process keeps every connection on kernel TCP.
#ifndef VSOCKET_PRELOAD_INTERPOSE_IO_URING_H_
#define VSOCKET_PRELOAD_INTERPOSE_IO_URING_H_

namespace vsocket::preload {

// Withdraws the fabrics for good (reason io_uring), quiets every listener
// and moves every connection to kernel TCP; once per process, later calls
// return at once.  Any thread.  REQUIRES: not in a vfork child.
void OnIoUringStarted();

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_INTERPOSE_IO_URING_H_
