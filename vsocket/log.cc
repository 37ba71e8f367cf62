#include "vsocket/log.h"

#include <errno.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include "base/real_libc.h"

namespace vsocket {

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(GetConfig().log_level);
}

void Log(LogLevel level, const char* format, ...) {
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  int saved_errno = errno;
  char line[512];
  int n = std::snprintf(line, sizeof(line), "vsocket[%d]: %s: ",
                        static_cast<int>(::getpid()),
                        kNames[static_cast<int>(level)]);
  va_list args;
  va_start(args, format);
  if (n > 0 && n < static_cast<int>(sizeof(line)))
    n += std::vsnprintf(line + n, sizeof(line) - n, format, args);
  va_end(args);
  if (n >= static_cast<int>(sizeof(line))) n = sizeof(line) - 1;
  if (n > 0) {
    line[n++] = '\n';
    // One write per line so lines from several threads do not interleave.
    ssize_t ignored = sys::write(STDERR_FILENO, line, n);
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace vsocket
