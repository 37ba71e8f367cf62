#include "testpeer_io.h"

#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "vsocket/vsocket.h"

namespace testpeer {
namespace {

std::string OrNull(const char* s) { return s ? s : "(null)"; }

const SocketApi kVsocketApi = {
    .plain = false,
    .socket = vsocket_socket,
    .bind = vsocket_bind,
    .listen = vsocket_listen,
    .accept4 = vsocket_accept4,
    .connect = vsocket_connect,
    .getsockname = vsocket_getsockname,
    .setsockopt = vsocket_setsockopt,
    .send = vsocket_send,
    .recv = vsocket_recv,
    .sendmsg = vsocket_sendmsg,
    .recvmsg = vsocket_recvmsg,
    .read = vsocket_read,
    .write = vsocket_write,
    .shutdown = vsocket_shutdown,
    .close = vsocket_close,
    .get_fl = [](int fd) { return vsocket_fcntl(fd, F_GETFL); },
    .set_fl = [](int fd, int fl) { return vsocket_fcntl(fd, F_SETFL, fl); },
    .path = [](int fd) { return OrNull(vsocket_transport_name(fd)); },
    .reason = [](int fd) { return OrNull(vsocket_fallback_reason(fd)); },
};

const SocketApi kLibcApi = {
    .plain = true,
    .socket = ::socket,
    .bind = ::bind,
    .listen = ::listen,
    .accept4 = ::accept4,
    .connect = ::connect,
    .getsockname = ::getsockname,
    .setsockopt = ::setsockopt,
    .send = ::send,
    .recv = ::recv,
    .sendmsg = ::sendmsg,
    .recvmsg = ::recvmsg,
    .read = ::read,
    .write = ::write,
    .shutdown = ::shutdown,
    .close = ::close,
    .get_fl = [](int fd) { return ::fcntl(fd, F_GETFL); },
    .set_fl = [](int fd, int fl) { return ::fcntl(fd, F_SETFL, fl); },
    .path = [](int) { return std::string("plain"); },
    .reason = [](int) { return std::string(); },
};

const SocketApi* g_api = nullptr;

}  // namespace

void SelectApi(bool plain) { g_api = plain ? &kLibcApi : &kVsocketApi; }
const SocketApi& Api() { return *g_api; }

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
