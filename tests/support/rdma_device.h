// Whether this host has an RDMA device: the RDMA tests run only where one
// exists (the Soft-RoCE guest) and skip elsewhere; host_no_rdma_device_test
// runs only where none exists.  Header-only.
#ifndef VSOCKET_TESTS_SUPPORT_RDMA_DEVICE_H_
#define VSOCKET_TESTS_SUPPORT_RDMA_DEVICE_H_

#include <dirent.h>

namespace vsocket_test {

// True when /sys/class/infiniband lists any device.
inline bool HaveRdmaDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (struct dirent* e = readdir(d)) any |= e->d_name[0] != '.';
  closedir(d);
  return any;
}

}  // namespace vsocket_test

#endif  // VSOCKET_TESTS_SUPPORT_RDMA_DEVICE_H_
