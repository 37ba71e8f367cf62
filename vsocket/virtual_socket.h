// One virtual socket: what vsocket knows about an AF_INET/AF_INET6 stream
// socket created through it, from socket() to close().  Shared by every
// descriptor number that refers to it (dup, F_DUPFD) through the SocketTable.
//
// States: kFresh (socket/bind), kListening, kConnecting (non-blocking
// connect in flight, an offer may be pending), kConnected (transport set).
//
// The transport is set once by connect/accept (SetTransport).  It may then
// be replaced by its successor (Transport::successor(): a shared-memory
// client whose offer was not claimed moves to a TcpTransport on the same
// descriptor number), at most once per transport, under `mutex`.  Readers
// load the pointer with acquire ordering and without a reference count:
// every transport this socket ever had, current or retired, stays alive
// until the VirtualSocket dies, so a loaded pointer is valid as long as
// the caller holds the VirtualSocket.  A retired transport forwards to its
// successor; TransportFinishingConnect() returns the newest.
#ifndef VSOCKET_VSOCKET_VIRTUAL_SOCKET_H_
#define VSOCKET_VSOCKET_VIRTUAL_SOCKET_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "vsocket/connection_endpoints.h"
#include "vsocket/connection_history.h"
#include "vsocket/path_selection.h"
#include "vsocket/transport.h"

namespace vsocket {

class VirtualSocket {
 public:
  enum class State { kFresh, kListening, kConnecting, kConnected };

  VirtualSocket(int domain, bool nonblocking)
      : domain_(domain), nonblocking_(nonblocking) {}
  ~VirtualSocket();  // releases the transport and the listener attachments

  int domain() const { return domain_; }
  State state() const { return state_.load(std::memory_order_acquire); }

  // The transport, or nullptr before the connection is established.  Not
  // a plain getter: for kConnecting it first asks the kernel whether the
  // handshake on `fd` finished (poll, getpeername) and, if so, completes
  // the connection (the provider's PendingConnection::Complete: descriptor
  // moves, shared-memory or RDMA setup).  If the transport was retired,
  // takes its successor over and returns that.  Any thread.
  Transport* TransportFinishingConnect(int fd);

  // A blocking connect() with a provider's offer runs on `fd` (set by the
  // connecting thread before the kernel's connect, cleared by
  // SetTransport or EndConnect).  Meanwhile the number names the kernel
  // TCP socket, then a provider's wait socket, neither of which carries
  // the stream: TransportFinishingConnect on another thread waits for the
  // transport instead (a thread that read there got the liveness
  // connection's reset, or a wake-up byte, where kernel TCP gives the
  // stream).  The connecting thread never waits on itself.
  void BeginConnect();
  void EndConnect();

  // Called by connect/accept once the path is chosen.  Takes ownership.
  // `ends`: the addresses connect/accept already know, for the live page
  // (null, or an address not known: asked of the kernel).
  void SetTransport(std::unique_ptr<Transport> transport,
                    const ConnectionEndpoints* ends = nullptr);
  // Non-blocking connect in flight; `pending` may be null (plain TCP, with
  // `reason`).
  void SetConnecting(std::unique_ptr<PendingConnection> pending,
                     FallbackReason reason);
  // Takes ownership of the attachments (path_selection.h).  Only the first
  // call's are kept: they never change once the state is kListening, so
  // accept() reads them without the lock.  `bound`: the listener's
  // address when it is one host (IsSpecificAddress), the local address of
  // every connection it accepts; null otherwise.
  void SetListening(ListenerAttachments attachments,
                    const struct sockaddr* bound = nullptr, socklen_t bound_len = 0);
  const ListenerAttachments& listeners() const { return listeners_; }
  // The `bound` kept by SetListening, or null.  Read without the lock,
  // like listeners().  Null too once the socket is transparent (TPROXY:
  // its connections' local address is where the client meant to go).
  const ConnectionEndpoints* listening_address() const {
    return transparent_.load(std::memory_order_relaxed) ? nullptr : listening_address_.get();
  }
  // setsockopt(IP_TRANSPARENT or IPV6_TRANSPARENT) was called, or the
  // kernel socket had it at listen().
  void NoteTransparent() { transparent_.store(true, std::memory_order_relaxed); }
  // setsockopt(SO_ZEROCOPY, on) before connect: the connection keeps
  // kernel TCP, which alone queues MSG_ZEROCOPY completions (kZeroCopy).
  void NoteZeroCopy() { zero_copy_.store(true, std::memory_order_relaxed); }
  bool zero_copy() const { return zero_copy_.load(std::memory_order_relaxed); }

  IoOptions SendOptions() const;
  IoOptions RecvOptions() const;
  bool nonblocking() const { return nonblocking_.load(std::memory_order_relaxed); }
  void set_nonblocking(bool on) { nonblocking_.store(on, std::memory_order_relaxed); }
  void set_send_timeout_ns(int64_t ns) { send_timeout_ns_.store(ns); }
  void set_recv_timeout_ns(int64_t ns) { recv_timeout_ns_.store(ns); }
  // setsockopt(SO_SNDBUF/SO_RCVBUF) succeeded on the kernel socket
  // (Transport::kSendBufferSet/kRecvBufferSet): tells the transport now, or
  // when there is one (SetTransport).
  void NoteBufferSizesSet(uint32_t which);
  // An accepted socket starts with its listener's (as the kernel's does).
  void InheritBufferSizes(const VirtualSocket& listener) {
    buffer_sizes_set_.store(listener.buffer_sizes_set_.load());
  }

  // setsockopt(SO_RCVLOWAT) succeeded on the kernel socket, which now holds
  // `lowat` (read back: the kernel clamps it).  Kept for blocking receives
  // (RecvOptions) and told to the transport now, or when there is one
  // (SetTransport), as Transport::RecvLowatChanged.  Any thread.
  void NoteRecvLowat(uint32_t lowat);
  uint32_t recv_lowat() const { return recv_lowat_.load(std::memory_order_relaxed); }
  // An accepted socket starts with its listener's mark, as the kernel's
  // does.  REQUIRES: before SetTransport.
  void InheritRecvLowat(const VirtualSocket& listener) {
    recv_lowat_.store(listener.recv_lowat(), std::memory_order_relaxed);
  }

  // setsockopt(IPPROTO_TCP, TCP_CORK) set `on` on the kernel socket: told
  // to the transport now, or when there is one (SetTransport), as
  // Transport::CorkChanged.  TCP_NODELAY turned on: Transport::
  // PushHeldSends now.  Any thread.
  void NoteCork(bool on);
  void NotePush();

  // For vsocket-stat (vsocket/live_stats.h): the connection was accepted
  // (else connected), and the line of the rule that chose its path (0:
  // none; a listener's is its accepted connections').  REQUIRES: called
  // before SetTransport or SetListening.
  void set_accepted(bool accepted) { accepted_ = accepted; }
  void set_rule_line(uint32_t line) { rule_line_ = line; }
  uint32_t rule_line() const { return rule_line_; }
  // TCP_DEFER_ACCEPT kept from the kernel on a listener with fast paths
  // (vsocket/deferred_accept.h), in the kernel's seconds; -1: the kernel
  // holds the option.
  int held_defer_accept() const { return held_defer_accept_.load(std::memory_order_relaxed); }
  void set_held_defer_accept(int s) { held_defer_accept_.store(s, std::memory_order_relaxed); }

  // A client socket: where connect() went, for the connection history
  // (vsocket/connection_history.h), which the destructor tells how many
  // calls moved data.  REQUIRES: the connecting thread, before connect()
  // returns.
  void set_destination(const DestinationKey& key) {
    destination_ = key;
    has_destination_ = true;
  }
  // A send or receive call moved data.  Counts up to kCountedCalls; past
  // that it only reads (no store on a busy connection's hot path).  Racing
  // threads may lose a count, which the history tolerates.
  void NoteDataCall() {
    uint32_t n = data_calls_.load(std::memory_order_relaxed);
    if (n < kCountedCalls) data_calls_.store(n + 1, std::memory_order_relaxed);
  }

  // shutdown() succeeded with `how`.  REQUIRES: connected.
  void NoteShutdown(int how);

  // For fork(): tells the transport one more process holds it.
  void BeforeFork();
  // Around fork(), before the first BeforeFork and after the fork in each
  // process (the socket table's fork handlers): no SetTransport runs in
  // between.  A transport set after its socket's BeforeFork but before the
  // fork would reach the child uncounted, and the child's close of it (a
  // subprocess closing every descriptor before exec) would release the
  // last holder under the parent: its peer saw end of stream mid-exchange.
  static void HoldTransportChangesForFork();
  static void ReleaseTransportChangesAfterFork(bool in_child);
  // In the child, after fork(): see Transport::AfterForkInChild.
  void AfterForkInChild();

 private:
  const int domain_;
  std::atomic<State> state_{State::kFresh};
  std::mutex mutex_;  // guards transitions of state_ and the fields below
  // Takes over the successors of the current transport (see above);
  // returns the newest.  Slow path of TransportFinishingConnect.
  Transport* AdoptSuccessor();

  // Waits (bounded) while another thread's blocking connect sets the
  // transport up; slow path of TransportFinishingConnect.
  void WaitForConnectingThread();

  std::unique_ptr<Transport> transport_owner_;
  std::atomic<Transport*> transport_{nullptr};
  // The thread inside a blocking connect() with an offer (BeginConnect),
  // 0 when none.
  std::atomic<pid_t> connecting_tid_{0};
  // Transports replaced by their successor, oldest first: kept alive (and
  // released) until the socket dies, for callers still inside them.
  std::vector<std::unique_ptr<Transport>> retired_;
  std::unique_ptr<PendingConnection> pending_;
  FallbackReason pending_reason_ = FallbackReason::kNone;
  ListenerAttachments listeners_;
  std::unique_ptr<ConnectionEndpoints> listening_address_;  // local only
  std::atomic<bool> transparent_{false};
  std::atomic<bool> zero_copy_{false};
  std::atomic<bool> nonblocking_;
  std::atomic<int64_t> send_timeout_ns_{-1};
  std::atomic<int64_t> recv_timeout_ns_{-1};
  std::atomic<uint32_t> buffer_sizes_set_{0};  // Transport::k*BufferSet
  std::atomic<uint32_t> recv_lowat_{1};        // SO_RCVLOWAT, the kernel's value
  std::atomic<bool> corked_{false};            // TCP_CORK, as set
  std::atomic<int> held_defer_accept_{-1};
  bool accepted_ = false;
  uint32_t rule_line_ = 0;
  LiveSlot* live_slot_ = nullptr;  // ours from SetTransport to the dtor
  static constexpr uint32_t kCountedCalls = 1024;  // >= VSOCKET_SHORT_CALLS
  DestinationKey destination_;
  bool has_destination_ = false;
  std::atomic<uint32_t> data_calls_{0};
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_VIRTUAL_SOCKET_H_
