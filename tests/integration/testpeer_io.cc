#include "testpeer_io.h"

#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>


namespace testpeer {
namespace {

std::string OrNull(const char* s) { return s ? s : "(null)"; }

const SocketApi* g_api = nullptr;
bool g_plain = false;

}  // namespace

void SelectApi(bool plain) {
  g_plain = plain;
  g_api = plain ? &vsocket_test::KernelApi() : &vsocket_test::VsocketApi();
}
const SocketApi& Api() { return *g_api; }

std::string PathOf(int fd) { return g_plain ? "plain" : OrNull(Api().transport_name(fd)); }
std::string ReasonOf(int fd) { return g_plain ? "" : OrNull(Api().fallback_reason(fd)); }

void Emit(const char* format, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(line, sizeof(line) - 1, format, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > static_cast<int>(sizeof(line)) - 2) n = sizeof(line) - 2;
  line[n++] = '\n';
  for (int off = 0; off < n;) {
    ssize_t w = ::write(1, line + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += w;
  }
}

std::string ErrName(int err) {
  if (err == 0) return "0";
  const char* name = strerrorname_np(err);
  return name ? name : "E" + std::to_string(err);
}

void Die(const char* op) {
  Emit("error op=%s errno=%s", op, ErrName(errno).c_str());
  std::exit(2);
}

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool WriteAll(int fd, const void* buf, size_t n, vsocket_test::Rng& choice,
              int flags) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w;
    switch (flags ? 0 : choice.Below(3)) {  // write() takes no flags
      case 0:
        w = Api().send(fd, p, n, flags);
        break;
      case 1:
        w = Api().write(fd, p, n);
        break;
      default: {  // two iovecs, split at an arbitrary point
        size_t first = choice.Below(n + 1);
        iovec iov[2] = {{const_cast<char*>(p), first},
                        {const_cast<char*>(p) + first, n - first}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        w = Api().sendmsg(fd, &msg, flags);
      }
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

ssize_t ReadSome(int fd, void* buf, size_t n, vsocket_test::Rng& choice) {
  for (;;) {
    ssize_t r;
    switch (choice.Below(3)) {
      case 0:
        r = Api().recv(fd, buf, n, 0);
        break;
      case 1:
        r = Api().read(fd, buf, n);
        break;
      default: {
        iovec iov = {buf, n};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        r = Api().recvmsg(fd, &msg, 0);
      }
    }
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

bool ReadExact(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = Api().recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = 0;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace testpeer
