// Reading a small file (a /proc setting, a rules file) whole, past the
// interposer.  Any thread; blocks only as read(2) on such a file does.
#ifndef VSOCKET_BASE_SMALL_FILE_H_
#define VSOCKET_BASE_SMALL_FILE_H_

#include <cstddef>
#include <string>

namespace vsocket::sys {

// Appends the whole of `path` to *text.  false with *err set: an errno
// from open/read (ENOENT: no such file), or EFBIG once the file passed
// `max_bytes` (then *text holds a truncated part).  Retries EINTR.
bool ReadSmallFile(const char* path, size_t max_bytes, std::string* text,
                   int* err);

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_SMALL_FILE_H_
