// Checks inside forked test processes, where gtest cannot report: a failed
// check prints one line on stderr and ends the process with exit status 1,
// which the parent reads from the wait status (see forked_pair.h).
//
// The line: "FAIL [scope/role] file:line: message (errno N text)", or
// "FAIL [role] ..." while the scope is null.  Written for code that runs
// between fork() and _exit(): stderr is flushed, stdout's buffer is not,
// and no atexit handler runs.
#ifndef VSOCKET_TESTS_SUPPORT_CHILD_CHECK_H_
#define VSOCKET_TESTS_SUPPORT_CHILD_CHECK_H_

#include <errno.h>
#include <string.h>

namespace vsocket_test {

// What runs: the case or scenario name, or nullptr (the line then names the
// role alone).  Set by the runner before it forks.
extern const char* g_scope;
// This process's part: "main" until a runner's child sets its own
// ("server", "client", ...).
extern const char* g_role;

// Prints the FAIL line for printf-style `fmt` with the errno current at the
// call, then _exit(1)s.
[[noreturn]] void Fail(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace vsocket_test

// CHECK(cond, fmt, ...): Fail() with the message unless `cond` holds.
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) ::vsocket_test::Fail(__FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)

// CHECK_ERR(expr, e): `expr` (evaluated once, errno cleared first) returns
// -1 with errno == e.
#define CHECK_ERR(expr, e)                                                  \
  do {                                                                      \
    errno = 0;                                                              \
    long long rc_ = static_cast<long long>(expr);                           \
    CHECK(rc_ == -1 && errno == (e), "%s: rc %lld, want -1/%s", #expr, rc_, \
          strerror(e));                                                     \
  } while (0)

// CHECK_RC(expr, want): `expr` (evaluated once, errno cleared first)
// returns exactly `want` (a count or 0).
#define CHECK_RC(expr, want)                                               \
  do {                                                                     \
    errno = 0;                                                             \
    long long rc_ = static_cast<long long>(expr);                          \
    CHECK(rc_ == static_cast<long long>(want), "%s: rc %lld, want %lld",   \
          #expr, rc_, static_cast<long long>(want));                       \
  } while (0)

#endif  // VSOCKET_TESTS_SUPPORT_CHILD_CHECK_H_
