#include "base/private_directory.h"

#include <errno.h>
#include <sys/stat.h>

namespace vsocket::sys {

int EnsurePrivateDirectory(const std::string& dir, uid_t euid) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return -errno;
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return -errno;
    if (::lstat(dir.c_str(), &st) != 0) return -errno;
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != euid || (st.st_mode & 077) != 0)
    return -EPERM;
  return 0;
}

}  // namespace vsocket::sys
