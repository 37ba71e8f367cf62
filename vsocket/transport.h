// The interface every transport implements: kernel TCP (vsocket/), and one
// per provider (vsocket/transport_provider.h), each in its backend's
// folder: the intra-host shared-memory rings, RDMA, and the TCP offload
// engine slot.  One Transport object carries one connected stream
// socket, in the spirit of Seastar's connected_socket_impl.
//
// Contract for implementations:
//  - Calls follow POSIX semantics for a connected SOCK_STREAM socket: they
//    return -1 and set errno exactly where the kernel would (EAGAIN, EPIPE,
//    ECONNRESET, EINTR, ...).  SIGPIPE is raised on EPIPE unless MSG_NOSIGNAL.
//    A transport that moves bytes itself gets these rules for SendMsg/RecvMsg
//    from vsocket/stream_io.h by implementing its StreamSteps.
//  - Blocking is the transport's job (it knows its own wait primitive), bounded
//    by IoOptions: nonblocking / timeouts / spin budget.
//  - Any thread may call any method; two threads may block in RecvMsg (or
//    SendMsg) on the same socket at once.
//  - user_fd() is a real kernel descriptor whose poll() readiness reflects the
//    transport's state truthfully; the socket layer hands it to the user.
#ifndef VSOCKET_VSOCKET_TRANSPORT_H_
#define VSOCKET_VSOCKET_TRANSPORT_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>

#include "vsocket/fallback_reason.h"
#include "vsocket/inplace_copy.h"
#include "vsocket/stats.h"
#include "vsocket/transport_kind.h"

namespace vsocket {

class ZeroCopyRegion;  // vsocket/zerocopy_region.h

// What a connection can do beyond this interface's contract; the core and
// the interposer test these bits (Transport::capabilities()), never a kind.
enum TransportCapability : uint32_t {
  // The user's descriptor IS the kernel TCP socket that carries the data
  // (kernel TCP): the kernel answers connect/SO_ERROR/sendfile itself.
  kCapKernelStream = 1u << 0,
  // SendRegistered() sends the registered buffer without a CPU copy.
  kCapZeroCopySend = 1u << 1,
  // RecvInPlace() shows the received bytes where they landed (no copy).
  kCapInPlaceRecv = 1u << 2,
  // Readiness changes in user space (rings, completion queues): a waiter
  // that busy-polls before sleeping sees it sooner than the kernel would.
  kCapUserSpaceReadiness = 1u << 3,
  // A connection can be handed to a preloaded image across exec().
  kCapExecHandover = 1u << 4,
};


// Per-call blocking behaviour, taken from the socket's flags and options.
struct IoOptions {
  bool nonblocking = false;     // O_NONBLOCK or MSG_DONTWAIT
  int64_t timeout_ns = -1;      // SO_RCVTIMEO / SO_SNDTIMEO; -1 = forever
  uint32_t spin_ns = 0;         // busy-poll budget before sleeping
  // Receives only: SO_RCVLOWAT as the kernel holds it (1: never set).  A
  // blocking receive waits for min(recv_lowat, length) bytes, as kernel
  // TCP does (vsocket/stream_io.h).
  uint32_t recv_lowat = 1;
  // The msghdr is vsocket's own and its iovec array checked already
  // (send, recv, read, write and their relatives build one around the
  // program's buffer, whose length they capped; readv and writev check the
  // program's array first): the stream rules skip CheckIovArray and
  // SetReceivedFields.  The ring copy still guards the buffers.
  bool msghdr_checked = false;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // The fabric carrying data: the stats slot of its provider.  Fixed for
  // the object's life (a connection that changes transport changes
  // object: see successor()).
  virtual TransportKind kind() const = 0;
  // TransportCapability bits.
  virtual uint32_t capabilities() const = 0;
  virtual FallbackReason fallback_reason() const = 0;

  virtual ssize_t SendMsg(const struct msghdr* msg, int flags,
                          const IoOptions& io) = 0;
  virtual ssize_t RecvMsg(struct msghdr* msg, int flags,
                          const IoOptions& io) = 0;
  virtual int Shutdown(int how) = 0;
  // Bytes readable without blocking (FIONREAD), or -1 with errno.
  virtual int ReadableBytes() = 0;
  // The pending socket error (SO_ERROR); clears it.
  virtual int TakeError() = 0;

  // For poll()/select() emulation: true when user_fd() reports readable
  // only because of a stale wake-up (no data, no end of stream, no error),
  // which this call drains so the descriptor stops being readable.  Never
  // consumes data or a pending error.  Transports without stale wake-ups
  // keep the default.
  virtual bool DropStaleWakeup() { return false; }

  // ---- User-space readiness (kCapUserSpaceReadiness; core: ----
  // ---- vsocket/poll_user_space.h, preload/epoll_set.h) ----
  // The readiness of the connection as its own memory shows it, without a
  // system call.  `exact` false: user space cannot say (end of stream, an
  // error or a move is pending, or the transport has no such view); the
  // caller asks the kernel about user_fd() instead, which then is exact.
  struct UserSpaceReadiness {
    uint32_t events = 0;    // POLLIN and POLLOUT that hold now
    uint64_t arrivals = 0;  // changes whenever new bytes arrive (EPOLLET)
    bool exact = false;
  };
  // `wanted`: POLLIN and/or POLLOUT, the events the caller asks about
  // (the others may be left out of `events` and their counters).
  virtual UserSpaceReadiness PollUserSpace(uint32_t wanted) {
    (void)wanted;
    return {};
  }
  // A poller watches this connection in user space from now on: the peer
  // need not make user_fd() readable for new data (no wake-up system call
  // per message).  Idempotent, any thread, any process holding the
  // connection.  Returns true while a hold is in place (taken now or
  // earlier, by anyone): the caller must then make sure someone calls
  // DropUserSpaceHold() before anybody sleeps in the kernel on user_fd()
  // (vsocket/user_space_holds.h keeps that list).
  virtual bool HoldForUserSpacePoll() { return false; }
  // Ends the hold, whoever took it: user_fd() is armed again and made
  // readable at once if data already waits.  Idempotent, any thread.
  virtual void DropUserSpaceHold() {}
  // A thread is about to sleep in the kernel waiting for user_fd() to be
  // readable (`asleep` true), or woke from that sleep (false; exactly once
  // per true).  While any thread sleeps so, no hold is given (the one in
  // place ends), so the sleeper gets the peer's wake-up.  Any thread.
  virtual void NoteKernelSleeper(bool asleep) { (void)asleep; }
  // Bookkeeping of vsocket/user_space_holds.cc: the hold epoch in which
  // this process last listed the transport (0: never).
  std::atomic<uint64_t> user_space_hold_epoch{0};

  // The descriptor the application holds (see the contract above).
  virtual int user_fd() const = 0;

  // ---- Live statistics (vsocket/live_stats.h) ----
  // The connection's slot in the live page, where its data calls count
  // their bytes (stats.h), or null.  Set by the socket layer before the
  // first data call; handed on to the successor by Retire().
  LiveSlot* live_slot() const { return live_slot_.load(std::memory_order_relaxed); }
  void AttachLiveSlot(LiveSlot* slot) { live_slot_.store(slot, std::memory_order_relaxed); }
  // The capacity of the ring this side sends into, for vsocket-stat (0:
  // the transport has no ring).
  virtual uint64_t send_ring_bytes() const { return 0; }

  // The socket layer is closing the descriptor number user_fd() while `fd`,
  // a duplicate of it (dup/dup2/F_DUPFD: the same open file), stays open:
  // from now on the transport uses `fd` wherever it used user_fd().
  virtual void MoveUserFd(int fd) = 0;

  // The kernel TCP socket that names this connection (getsockname,
  // getpeername, options).  Owned by the transport.
  virtual int tcp_fd() const = 0;

  // Called in the parent just before fork() (pthread_atfork's prepare
  // handler) for every live connection, so the transport can count the
  // processes that will hold it.
  virtual void BeforeFork() {}
  // Called in the child process right after fork(), where only the thread
  // that forked exists: per-thread bookkeeping copied from the parent goes.
  virtual void AfterForkInChild() {}

  // ---- Hand-over across exec (kCapExecHandover; preload/exec_handover.h) ----
  // Describes this connection for a new, preloaded program image: its
  // provider's own `fields` (text without ',', ';' or '+' inside a field),
  // and the private descriptors that must stay open across the exec (the
  // caller clears their FD_CLOEXEC, and restores it if exec fails).  false:
  // it cannot be handed over now; the ordinary release applies.
  // TransportProvider::AdoptFromExec() rebuilds it in the new image.
  virtual bool DescribeForExec(std::vector<std::string>* fields,
                               std::vector<int>* keep_fds) {
    (void)fields;
    (void)keep_fds;
    return false;
  }
  // Just before the exec system call, on the thread that calls it (every
  // other thread of this image dies with the exec), and right after it if
  // the call failed.  Only for connections DescribeForExec() accepted.
  virtual void BeforeExec() {}
  virtual void AfterFailedExec() {}

  // ---- Buffer sizes ----
  // The application set SO_SNDBUF (kSendBufferSet) and/or SO_RCVBUF
  // (kRecvBufferSet) on this connection, or before it existed on the socket
  // or its listener; tcp_fd() holds the values (getsockopt gives what the
  // kernel made of them).  A transport with buffers of its own bounds its
  // bytes in flight by them, as kernel TCP would.  Any thread.
  enum : uint32_t { kSendBufferSet = 1u << 0, kRecvBufferSet = 1u << 1 };
  virtual void BufferSizesChanged(uint32_t which) { (void)which; }

  // ---- Receive low-water mark ----
  // SO_RCVLOWAT on tcp_fd() is now `lowat` (the kernel's value, after its
  // clamping; 1: the default), set on this connection, before it existed on
  // the socket, or on its listener.  A transport that decides its user_fd()'s
  // readiness itself (the rings, the CQ) reports it readable only once that
  // many bytes are queued, or at end of stream or an error, as kernel TCP's
  // poll does, and its DropStaleWakeup() treats a wake-up below the mark as
  // stale.  Blocking receives get the mark through IoOptions::recv_lowat.
  // Any thread; rare (never on a data path).  Default: nothing (kernel TCP
  // applies the option itself).
  virtual void RecvLowatChanged(uint32_t lowat) { (void)lowat; }

  // ---- Held sends (TCP_CORK, MSG_MORE) ----
  // TCP_CORK on tcp_fd() is now `on` (set on this connection, or before it
  // existed on the socket).  A transport that carries the bytes itself and
  // holds partial sends as kernel TCP does (shm) holds them while the cork
  // is in, and sends what it holds when it is taken out.  Any thread.
  // Default: nothing (the kernel applies its own option).
  virtual void CorkChanged(bool on) { (void)on; }
  // TCP_NODELAY was turned on: as kernel TCP does, what a cork or MSG_MORE
  // holds goes now (the cork stays in).  Any thread.  Default: nothing.
  virtual void PushHeldSends() {}

  // ---- Moving to kernel TCP while connected ----
  // Code that bypasses vsocket is about to use the connection (a program
  // image that is not preloaded, glibc's stdio): move the stream onto its
  // kernel TCP connection now, with no byte lost or repeated, so that
  // user_fd() becomes that TCP socket and successor() a TcpTransport.  The
  // peer follows by itself.  true when done (or when the connection already
  // is kernel TCP); false when it cannot be done (then nothing changed, or
  // the connection was reset), and the caller keeps its old treatment.
  // Any thread; does not block on the peer.  Default: false.
  virtual bool MoveToKernelTcp(FallbackReason reason) {
    (void)reason;
    return false;
  }

  // ---- Zero-copy calls of the explicit API (vsocket/zerocopy_api.cc) ----
  // Same blocking, timeout, EPIPE/SIGPIPE/MSG_NOSIGNAL and errno rules as
  // SendMsg/RecvMsg.  The defaults (transport_zerocopy.cc) copy; a
  // transport that can do better overrides them.

  // Sends region[offset, offset + len) as SendMsg would send those bytes,
  // and returns only when the caller may change them again.  Returns the
  // bytes sent (all of them, unless a timeout, signal or MSG_DONTWAIT cut
  // the send short) or -1 with errno.  Default: SendMsg (the bytes are
  // copied into the transport's buffers, one copy).
  // REQUIRES: offset + len <= region.size() (the caller checked); the region
  //           outlives the call.
  virtual ssize_t SendRegistered(ZeroCopyRegion& region, size_t offset,
                                 size_t len, int flags, const IoOptions& io);

  // Waits as RecvMsg does until data, end of stream or an error, then sets
  // *data to the next unread bytes of the stream and returns how many of
  // them (1..max) are contiguous there; 0 at end of stream (or max == 0),
  // -1 with errno (EAGAIN, ECONNRESET, EINTR, ...).  Nothing is consumed:
  // the bytes stay valid and in place until ReleaseInPlace().  One view per
  // connection: while one is outstanding (or another thread is waiting for
  // one), -1 with EBUSY.  `flags`: 0 or MSG_DONTWAIT.
  // Default: a MSG_PEEK into a per-connection buffer (inplace_copy.h).
  // REQUIRES: no other receive call consumes bytes from the connection
  //           while the view is outstanding.
  virtual ssize_t RecvInPlace(const void** data, size_t max, int flags,
                              const IoOptions& io);
  // Ends the outstanding view, consuming its first `n` bytes (0..its
  // length; the rest stays unread).  0, or -1 with EINVAL when there is no
  // view or `n` exceeds it.
  virtual int ReleaseInPlace(size_t n, const IoOptions& io);

  // Called by the socket layer when the last descriptor referring to this
  // connection in this process is closed.  Only when no other process holds
  // the connection is the peer told (FIN, or RST if unread data remains).
  // Releases every resource the transport owns except the user fd.
  virtual void Release() = 0;

  // ---- Replacement (a shared-memory client falling back to TCP) ----
  // A transport that can no longer carry its connection names, once, the
  // one that carries it from then on; the socket layer (VirtualSocket)
  // then takes the successor over and keeps this one, retired, alive until
  // the connection's end, so calls that loaded the old pointer stay safe:
  // its data calls hand their rest to the successor (stream_io.h,
  // kStreamMoved), its other calls forward to it.
  // Thread-safety: Retire() may run on any thread (the liveness watcher's
  // included) and publishes with release; successor() is an acquire load
  // (one load, null while the transport carries the connection).
  Transport* successor() const {
    return successor_.load(std::memory_order_acquire);
  }
  // The owner takes the successor over.  nullptr if there is none or it
  // was taken.  REQUIRES: only the owner calls it, serialised (the
  // VirtualSocket's mutex).
  std::unique_ptr<Transport> TakeSuccessor() {
    return successor() ? std::move(successor_owner_) : nullptr;
  }

 protected:
  // Publishes `next` as successor().  REQUIRES: called at most once, and
  // `next` already carries the connection (it is used at once).
  void Retire(std::unique_ptr<Transport> next) {
    next->AttachLiveSlot(live_slot());
    NoteRetiredInLiveSlot(*next);
    successor_owner_ = std::move(next);
    successor_.store(successor_owner_.get(), std::memory_order_release);
  }

 private:
  // The slot now names `next`'s transport and reason (virtual_socket.cc).
  void NoteRetiredInLiveSlot(const Transport& next);
  std::atomic<LiveSlot*> live_slot_{nullptr};
  InPlaceCopy inplace_copy_;  // the default RecvInPlace's buffer and view
  std::atomic<Transport*> successor_{nullptr};
  // Owns successor_ until TakeSuccessor().  Written once, before successor_
  // is published; read only after successor_ was seen set.
  std::unique_ptr<Transport> successor_owner_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_TRANSPORT_H_
