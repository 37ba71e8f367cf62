#include "base/small_file.h"

#include <errno.h>
#include <fcntl.h>

#include "base/real_libc.h"

namespace vsocket::sys {

bool ReadSmallFile(const char* path, size_t max_bytes, std::string* text,
                   int* err) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  char buf[4096];
  bool ok = true;
  for (;;) {
    ssize_t n = sys::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = errno;
      ok = false;
      break;
    }
    if (n == 0) break;
    text->append(buf, static_cast<size_t>(n));
    if (text->size() > max_bytes) {
      *err = EFBIG;
      ok = false;
      break;
    }
  }
  sys::close(fd);
  return ok;
}

}  // namespace vsocket::sys
