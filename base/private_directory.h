// The per-user directories vsocket keeps under /dev/shm (segments, live
// statistics pages): made 0700 when missing, and refused unless the user
// owns them and nobody else may enter.  Any thread.
#ifndef VSOCKET_BASE_PRIVATE_DIRECTORY_H_
#define VSOCKET_BASE_PRIVATE_DIRECTORY_H_

#include <sys/types.h>

#include <string>

namespace vsocket::sys {

// Makes sure `dir` is a directory of user `euid` with no group or other
// bits.  Looked at every time (another user could have made the name while
// it did not exist); made only when missing.  Returns 0, -EPERM when it is
// not such a directory, or -errno from lstat/mkdir.
int EnsurePrivateDirectory(const std::string& dir, uid_t euid);

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_PRIVATE_DIRECTORY_H_
