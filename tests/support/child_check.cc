#include "child_check.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace vsocket_test {

const char* g_scope = nullptr;
const char* g_role = "main";

void Fail(const char* file, int line, const char* fmt, ...) {
  int saved = errno;  // vsnprintf may change it
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (g_scope != nullptr) {
    fprintf(stderr, "FAIL [%s/%s] %s:%d: %s (errno %d %s)\n", g_scope, g_role,
            file, line, msg, saved, strerror(saved));
  } else {
    fprintf(stderr, "FAIL [%s] %s:%d: %s (errno %d %s)\n", g_role, file, line,
            msg, saved, strerror(saved));
  }
  fflush(stderr);
  _exit(1);
}

}  // namespace vsocket_test
