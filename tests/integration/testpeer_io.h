// vsocket_testpeer's view of the socket API and its output channel.
//
// SocketApi is a table of the calls the test peer makes; two tables exist:
// one calling vsocket_* and one calling libc directly (--plain), so that the
// plain peer never enters the library. Everything else in the test peer goes
// through Api().
#ifndef VSOCKET_TESTS_INTEGRATION_TESTPEER_IO_H_
#define VSOCKET_TESTS_INTEGRATION_TESTPEER_IO_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "byte_stream.h"
#include "clock.h"

namespace testpeer {

struct SocketApi {
  bool plain;
  int (*socket)(int, int, int);
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*getsockname)(int, sockaddr*, socklen_t*);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  ssize_t (*recvmsg)(int, msghdr*, int);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*write)(int, const void*, size_t);
  int (*shutdown)(int, int);
  int (*close)(int);
  int (*get_fl)(int);           // fcntl(F_GETFL)
  int (*set_fl)(int, int);      // fcntl(F_SETFL, flags)
  std::string (*path)(int);     // "shm" / "tcp" (vsocket) or "plain"
  std::string (*reason)(int);   // fallback reason ("" on the fast path)
};

// Selects the table once, before any socket call.
void SelectApi(bool plain);
const SocketApi& Api();

// Prints one protocol line ("TAG key=value ...") on stdout with a single
// write(2), so lines of concurrent worker processes never interleave.
void Emit(const char* format, ...) __attribute__((format(printf, 1, 2)));
// Emits "error op=OP errno=NAME" and exits with status 2.
[[noreturn]] void Die(const char* op);
// Symbolic errno name ("EPIPE"), "0" for 0.
std::string ErrName(int err);
using vsocket_test::NowNs;  // CLOCK_MONOTONIC
void SleepMs(int ms);

// Writes all n bytes, spreading the calls over send/write/sendmsg as chosen
// by `choice`. Returns false on error (errno set).
bool WriteAll(int fd, const void* buf, size_t n, vsocket_test::Rng& choice,
              int flags = 0);
// One read of at most n bytes via recv/read/recvmsg as chosen by `choice`;
// retries EINTR. Returns what the call returned.
ssize_t ReadSome(int fd, void* buf, size_t n, vsocket_test::Rng& choice);
// Reads exactly n bytes. Returns false on EOF or error (errno 0 on EOF).
bool ReadExact(int fd, void* buf, size_t n);

}  // namespace testpeer

#endif  // VSOCKET_TESTS_INTEGRATION_TESTPEER_IO_H_
