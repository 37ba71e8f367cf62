// The toe transport's settings, VSOCKET_TOE_*, read once per process.
#ifndef VSOCKET_TOE_BACKEND_TOE_CONFIG_H_
#define VSOCKET_TOE_BACKEND_TOE_CONFIG_H_

#include <cstdint>

namespace vsocket::toe {

struct ToeConfig {
  // VSOCKET_TOE_READAHEAD: bytes a connection may peek ahead of the
  // application (the read-ahead window, per connection, allocated on first
  // use); 0 turns read-ahead off.  Power of two, 4K..1M.
  uint32_t readahead_bytes = 64 * 1024;
  // VSOCKET_TOE_SEND_ZC_MIN: sends of at least this many bytes go out with
  // IORING_OP_SEND_ZC (where the kernel has it); 0 = never.  Off by
  // default: on loopback the kernel copies anyway and waiting for the
  // notification made every size slower (docs/BENCHMARKS.md, "toe").
  uint64_t send_zc_min = 0;
  // VSOCKET_TOE_READAHEAD_INHERITABLE=1: read ahead on descriptors without
  // FD_CLOEXEC too.  Off by default: an image started where the interposer
  // cannot see the exec (posix_spawn, system, popen) that inherits the
  // socket and reads it would see again up to a window of bytes this
  // process already delivered (docs/COMPATIBILITY.md).
  bool readahead_inheritable = false;
  // VSOCKET_TOE_SQPOLL: 0 (default) = off; otherwise rings are made with
  // IORING_SETUP_SQPOLL, all of the process's rings sharing one kernel
  // submission thread that sleeps after this many milliseconds without
  // work (1 = kDefaultSqpollIdleMs; at most kMaxSqpollIdleMs).  What it
  // costs and measured: toe_backend/README.md, docs/BENCHMARKS.md ("toe").
  uint32_t sqpoll_idle_ms = 0;
  // VSOCKET_TOE_SQPOLL_SPIN_US: with SQPOLL, how long a call spins on its
  // completion queue before it sleeps in io_uring_enter (0 to 1000 us).
  // The spin is what saves the system call, and it pays only where the SQ
  // thread has a core of its own: on 2 shared vCPUs every spin tried was
  // slower than none, and spins of 10 us and more starved the SQ thread
  // for whole scheduler ticks (docs/BENCHMARKS.md, "toe").  Default 0.
  uint32_t sqpoll_spin_us = 0;
  // VSOCKET_TOE_CORK: sends coalesced across calls (send_cork.h): a small
  // send (at most a quarter of this) right after a send is held in user
  // memory, up to this many bytes per connection, until the next other
  // call, wait, or flusher tick (1-2 ms).  0 = off: every send is a
  // sendmsg before it returns.  At most 1M.
  uint32_t cork_bytes = 16 * 1024;
};

inline constexpr uint32_t kDefaultSqpollIdleMs = 10;
inline constexpr uint32_t kMaxSqpollIdleMs = 60000;
inline constexpr uint32_t kMaxSqpollSpinUs = 1000;

const ToeConfig& GetToeConfig();

}  // namespace vsocket::toe

#endif  // VSOCKET_TOE_BACKEND_TOE_CONFIG_H_
