// C++ wrapper over the vsocket C API: an owning, move-only Socket whose
// methods mirror the C calls.  Errors are reported the POSIX way (return -1
// and errno), so code ported from BSD sockets keeps its error handling;
// nothing here throws.
//
//   vsocket::Socket s = vsocket::Socket::Open(AF_INET, SOCK_STREAM);
//   if (!s || s.Connect(addr) != 0) perror("connect");
//   s.SendAll(data, size);
//   std::printf("%s\n", s.TransportName());
#ifndef VSOCKET_VSOCKET_HPP_
#define VSOCKET_VSOCKET_HPP_

#include <errno.h>

#include <cstddef>
#include <utility>

#include "vsocket/vsocket.h"

namespace vsocket {

// A buffer registered once for zero-copy sends (vsocket_register); owning,
// move-only.  The destructor deregisters it.
// REQUIRES: no send from it is still running when it is destroyed (the C
// call would fail with EBUSY and the registration would leak).
class Region {
 public:
  Region() = default;
  // nullptr-like (false) with errno on failure.
  static Region Register(const void* buf, size_t len) {
    return Region(vsocket_register(buf, len));
  }
  Region(Region&& other) noexcept : r_(std::exchange(other.r_, nullptr)) {}
  Region& operator=(Region&& other) noexcept {
    if (this != &other) {
      Reset();
      r_ = std::exchange(other.r_, nullptr);
    }
    return *this;
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() { Reset(); }

  explicit operator bool() const { return r_ != nullptr; }
  struct vsocket_region* get() const { return r_; }
  // 0, or -1 with errno (EBUSY: a send from it is running; kept).
  int Reset() {
    if (r_ == nullptr) return 0;
    if (vsocket_deregister(r_) != 0) return -1;
    r_ = nullptr;
    return 0;
  }

 private:
  explicit Region(struct vsocket_region* r) : r_(r) {}
  struct vsocket_region* r_ = nullptr;
};

class Socket {
 public:
  Socket() = default;
  // Takes ownership of a descriptor returned by the vsocket API.
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  static Socket Open(int domain, int type, int protocol = 0) {
    return Socket(vsocket_socket(domain, type, protocol));
  }

  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Gives up ownership.
  int Release() { return std::exchange(fd_, -1); }

  template <typename Addr>
  int Bind(const Addr& addr) {
    return vsocket_bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  }
  template <typename Addr>
  int Connect(const Addr& addr) {
    return vsocket_connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  }
  int Listen(int backlog = SOMAXCONN) { return vsocket_listen(fd_, backlog); }
  Socket Accept(int flags = 0) {
    return Socket(vsocket_accept4(fd_, nullptr, nullptr, flags));
  }

  ssize_t Send(const void* buf, size_t len, int flags = 0) {
    return vsocket_send(fd_, buf, len, flags);
  }
  ssize_t Recv(void* buf, size_t len, int flags = 0) {
    return vsocket_recv(fd_, buf, len, flags);
  }
  // Sends every byte (retrying after EINTR and short writes).  Returns len or
  // -1 with errno.
  ssize_t SendAll(const void* buf, size_t len, int flags = 0) {
    const char* p = static_cast<const char*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = vsocket_send(fd_, p + done, len - done, flags);
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  // Zero copy (see "Zero copy" in vsocket.h): a send straight from a
  // registered region, and a view of received bytes that stays valid until
  // ReleaseInPlace().
  ssize_t SendRegistered(const Region& r, size_t offset, size_t len, int flags = 0) {
    return vsocket_send_registered(fd_, r.get(), offset, len, flags);
  }
  ssize_t RecvInPlace(const void** data, size_t max, int flags = 0) {
    return vsocket_recv_inplace(fd_, data, max, flags);
  }
  int ReleaseInPlace(size_t n) { return vsocket_recv_release(fd_, n); }

  int Shutdown(int how) { return vsocket_shutdown(fd_, how); }
  int SetOption(int level, int name, int value) {
    return vsocket_setsockopt(fd_, level, name, &value, sizeof(value));
  }
  int GetOption(int level, int name, int* value) {
    socklen_t len = sizeof(*value);
    return vsocket_getsockopt(fd_, level, name, value, &len);
  }
  int Close() {
    if (fd_ < 0) return 0;
    return vsocket_close(std::exchange(fd_, -1));
  }

  // "shm" / "rdma" / "tcp", or nullptr before the connection exists.
  const char* TransportName() const { return vsocket_transport_name(fd_); }
  // "" on a fast path, otherwise the named reason.
  const char* FallbackReason() const { return vsocket_fallback_reason(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_HPP_
