// Logging to stderr, filtered by VSOCKET_LOG.  Lines start with
// "vsocket[<pid>]: ".  Thread-safe; never allocates on the caller's behalf
// beyond a stack buffer.
#ifndef VSOCKET_VSOCKET_LOG_H_
#define VSOCKET_VSOCKET_LOG_H_

#include "vsocket/config.h"

namespace vsocket {

bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace vsocket

#define VSOCKET_LOG(level, ...)                                  \
  do {                                                           \
    if (::vsocket::LogEnabled(::vsocket::LogLevel::level))       \
      ::vsocket::Log(::vsocket::LogLevel::level, __VA_ARGS__);   \
  } while (0)

#endif  // VSOCKET_VSOCKET_LOG_H_
