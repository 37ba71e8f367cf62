// Socket helpers over the vsocket API, or the kernel's for the "tcp" row
// (bench_socket_calls.h). Every failure throws BenchError whose
// message names the call and carries strerror; timeouts are failures too.
#ifndef VSOCKET_BENCHMARKS_BENCH_NET_H_
#define VSOCKET_BENCHMARKS_BENCH_NET_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace vbench {

class BenchError : public std::runtime_error {
 public:
  explicit BenchError(const std::string& what, int error_number = 0)
      : std::runtime_error(what), errno_(error_number) {}
  int error_number() const { return errno_; }  // 0 when not from a syscall

 private:
  int errno_;
};

// vsocket_socket() refused to make a socket in a way that means the library
// does not offer the transport chosen by VSOCKET_TRANSPORT (EINVAL,
// EPROTONOSUPPORT, ...). The benchmark reports such a transport as skipped.
class TransportUnavailable : public BenchError {
 public:
  using BenchError::BenchError;
};

// Throws BenchError("<what>: <strerror(errno)>", errno).
[[noreturn]] void throw_errno(const std::string& what);

// An IPv4/IPv6 address to connect to.
struct PeerAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// Resolves host:port (numeric or DNS name). Does not touch vsocket.
PeerAddress resolve_peer(const std::string& host, uint16_t port);

// A listening IPv4 socket on bind_ip:port (port 0 = ephemeral) with
// SO_REUSEADDR.
int listen_on(const char* bind_ip, uint16_t port);
uint16_t local_port(int fd);

// Connects a blocking socket; io_timeout_ms bounds connect, send and recv.
int connect_to(const PeerAddress& peer, int io_timeout_ms);

// SO_RCVTIMEO + SO_SNDTIMEO, so that a blocked call fails instead of hanging.
void set_io_timeout(int fd, int timeout_ms);
void set_nodelay(int fd);

// Sends exactly len bytes.
void send_all(int fd, const void* buf, size_t len);
// Receives exactly len bytes. Returns false on orderly EOF before the first
// byte; EOF in the middle is an error.
bool recv_all(int fd, void* buf, size_t len);
// One recv of at most len bytes; 0 means EOF.
size_t recv_some(int fd, void* buf, size_t len);

// vsocket_close, ignoring -1.
void close_quietly(int fd);

// vsocket_transport_name / vsocket_fallback_reason as strings; "" for NULL.
std::string transport_of(int fd);
std::string fallback_reason_of(int fd);

}  // namespace vbench

#endif  // VSOCKET_BENCHMARKS_BENCH_NET_H_
