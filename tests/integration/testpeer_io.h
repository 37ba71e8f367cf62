// vsocket_testpeer's view of the socket API and its output channel.
//
// Api() is the table of the calls the test peer makes (tests/support/
// socket_api.h): vsocket_* or, with --plain, libc directly, so that the
// plain peer never enters the library.  Everything else in the test peer
// goes through Api().
#ifndef VSOCKET_TESTS_INTEGRATION_TESTPEER_IO_H_
#define VSOCKET_TESTS_INTEGRATION_TESTPEER_IO_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "byte_stream.h"
#include "clock.h"
#include "socket_api.h"

namespace testpeer {

using vsocket_test::SocketApi;

// Selects the table once, before any socket call.
void SelectApi(bool plain);
const SocketApi& Api();
// What the peer reports of a connection: its path ("shm", "tcp", ...; "plain"
// with --plain) and its fallback reason ("" with --plain).
std::string PathOf(int fd);
std::string ReasonOf(int fd);

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
