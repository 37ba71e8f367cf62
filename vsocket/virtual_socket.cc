#include "vsocket/virtual_socket.h"

#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <new>
#include <shared_mutex>

#include "base/real_libc.h"
#include "vsocket/config.h"
#include "vsocket/live_stats.h"
#include "vsocket/stats.h"
#include "vsocket/wait.h"

namespace vsocket {

namespace {

// Releases `t`, then a successor it made and still owns (a client's offer
// revoked by the release itself).
void ReleaseWithSuccessor(Transport& t) {
  t.Release();
  if (std::unique_ptr<Transport> next = t.TakeSuccessor()) ReleaseWithSuccessor(*next);
}

}  // namespace

void Transport::NoteRetiredInLiveSlot(const Transport& next) {
  LiveSlotSetTransport(live_slot(), next.kind(), next.fallback_reason());
}

VirtualSocket::~VirtualSocket() {
  if (has_destination_ && state() == State::kConnected)
    ProcessConnectionHistory().Record(destination_,
                                      data_calls_.load(std::memory_order_relaxed));
  if (transport_owner_) ReleaseWithSuccessor(*transport_owner_);
  for (auto it = retired_.rbegin(); it != retired_.rend(); ++it) (*it)->Release();
  LiveSlotClose(live_slot_);
}

void VirtualSocket::NoteShutdown(int how) {
  uint32_t flags = 0;
  if (how == SHUT_RD || how == SHUT_RDWR) flags |= kLiveShutRead;
  if (how == SHUT_WR || how == SHUT_RDWR) flags |= kLiveShutWrite;
  // live_slot_ was set before the transport was published (SetTransport).
  LiveSlotAddFlags(live_slot_, flags);
}

namespace {
// Shared by SetTransport, exclusive across fork() (HoldTransportChangesForFork).
// Taken before a socket's mutex_, never while holding one.
std::shared_mutex g_transport_changes;
}  // namespace

void VirtualSocket::HoldTransportChangesForFork() { g_transport_changes.lock(); }

void VirtualSocket::ReleaseTransportChangesAfterFork(bool in_child) {
  // glibc's rwlock remembers the writer's thread id, which differs in the
  // child: a fresh, unlocked one there.
  if (in_child) {
    new (&g_transport_changes) std::shared_mutex();
  } else {
    g_transport_changes.unlock();
  }
}

void VirtualSocket::BeginConnect() {
  connecting_tid_.store(::gettid(), std::memory_order_release);
}

void VirtualSocket::EndConnect() {
  connecting_tid_.store(0, std::memory_order_release);
}

void VirtualSocket::WaitForConnectingThread() {
  const pid_t tid = connecting_tid_.load(std::memory_order_acquire);
  if (tid == 0 || tid == ::gettid()) return;
  // The kernel's handshake and then the provider's setup: microseconds on
  // this host, a round trip to another.  Bounded all the same (a peer that
  // does not answer the SYN; a fork child inherits the mark with no thread
  // to clear it): then the kernel answers, as before the connect ended.
  const int64_t give_up = MonotonicNs() + 2'000'000'000;
  while (connecting_tid_.load(std::memory_order_acquire) == tid &&
         transport_.load(std::memory_order_acquire) == nullptr &&
         MonotonicNs() < give_up) {
    struct timespec pause = {0, 20'000};
    ::nanosleep(&pause, nullptr);
  }
}

void VirtualSocket::SetTransport(std::unique_ptr<Transport> transport,
                                 const ConnectionEndpoints* ends) {
  std::shared_lock<std::shared_mutex> no_fork_meanwhile(g_transport_changes);
  std::lock_guard<std::mutex> lock(mutex_);
  StatsConnectionOpened(transport->kind());
  // Kernel TCP from the start: its reason is counted here.  A fast-path
  // transport that already moved to TCP (its peer moved it before this
  // call) has a reason too, but counted it with the move (CountMove).
  if ((transport->capabilities() & kCapKernelStream) &&
      transport->fallback_reason() != FallbackReason::kNone)
    StatsFallback(transport->fallback_reason(), nullptr);
  if (uint32_t which = buffer_sizes_set_.load()) transport->BufferSizesChanged(which);
  if (uint32_t lowat = recv_lowat(); lowat > 1) transport->RecvLowatChanged(lowat);
  if (corked_.load(std::memory_order_relaxed)) transport->CorkChanged(true);
  if (!live_slot_) {
    LiveSlotIdentity id;
    id.fd = transport->user_fd();
    id.tcp_fd = transport->tcp_fd();
    id.kind = transport->kind();
    id.reason = transport->fallback_reason();
    id.accepted = accepted_;
    id.rule_line = rule_line_;
    id.ring_bytes = static_cast<uint32_t>(transport->send_ring_bytes());
    id.ends = ends;
    live_slot_ = LiveSlotOpen(id);
  }
  transport->AttachLiveSlot(live_slot_);
  transport_.store(transport.get(), std::memory_order_release);
  transport_owner_ = std::move(transport);
  pending_.reset();
  state_.store(State::kConnected, std::memory_order_release);
  connecting_tid_.store(0, std::memory_order_release);
}

void VirtualSocket::NoteBufferSizesSet(uint32_t which) {
  buffer_sizes_set_.fetch_or(which);
  if (state() != State::kConnected) return;  // SetTransport applies them
  Transport* t = transport_.load(std::memory_order_acquire);
  while (t && t->successor()) t = t->successor();
  if (t) t->BufferSizesChanged(buffer_sizes_set_.load());
}

void VirtualSocket::NoteRecvLowat(uint32_t lowat) {
  // Under the mutex, so that SetTransport sees it or we see its transport.
  std::lock_guard<std::mutex> lock(mutex_);
  recv_lowat_.store(lowat < 1 ? 1 : lowat, std::memory_order_relaxed);
  Transport* t = transport_.load(std::memory_order_acquire);
  while (t && t->successor()) t = t->successor();
  if (t) t->RecvLowatChanged(recv_lowat());
}

void VirtualSocket::NoteCork(bool on) {
  // Under the mutex, so that SetTransport sees it or we see its transport.
  std::lock_guard<std::mutex> lock(mutex_);
  corked_.store(on, std::memory_order_relaxed);
  Transport* t = transport_.load(std::memory_order_acquire);
  while (t && t->successor()) t = t->successor();
  if (t) t->CorkChanged(on);
}

void VirtualSocket::NotePush() {
  std::lock_guard<std::mutex> lock(mutex_);
  Transport* t = transport_.load(std::memory_order_acquire);
  while (t && t->successor()) t = t->successor();
  if (t) t->PushHeldSends();
}

void VirtualSocket::SetConnecting(std::unique_ptr<PendingConnection> pending,
                                  FallbackReason reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = std::move(pending);
  pending_reason_ = reason;
  state_.store(State::kConnecting, std::memory_order_release);
}

void VirtualSocket::SetListening(ListenerAttachments attachments,
                                 const struct sockaddr* bound, socklen_t bound_len) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state() == State::kListening) return;  // the first call's are kept
  listeners_ = std::move(attachments);
  if (IsSpecificAddress(bound, bound_len)) {
    listening_address_ = std::make_unique<ConnectionEndpoints>();
    listening_address_->SetLocal(bound, bound_len);
  }
  state_.store(State::kListening, std::memory_order_release);
}

Transport* VirtualSocket::AdoptSuccessor() {
  std::lock_guard<std::mutex> lock(mutex_);
  Transport* current = transport_.load(std::memory_order_relaxed);
  while (std::unique_ptr<Transport> next = current->TakeSuccessor()) {
    current = next.get();
    retired_.push_back(std::move(transport_owner_));
    transport_owner_ = std::move(next);
    transport_.store(current, std::memory_order_release);
  }
  return current;
}

Transport* VirtualSocket::TransportFinishingConnect(int fd) {
  Transport* transport = transport_.load(std::memory_order_acquire);
  if (transport) {
    if (transport->successor() == nullptr) [[likely]] return transport;
    return AdoptSuccessor();
  }
  if (connecting_tid_.load(std::memory_order_acquire) != 0) [[unlikely]] {
    WaitForConnectingThread();
    transport = transport_.load(std::memory_order_acquire);
    if (transport) return transport->successor() ? AdoptSuccessor() : transport;
  }
  if (state() != State::kConnecting) return nullptr;
  // A non-blocking connect was in flight: has the kernel finished it?
  struct pollfd pfd = {fd, POLLOUT, 0};
  if (sys::poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLOUT | POLLERR | POLLHUP)))
    return nullptr;
  struct sockaddr_storage peer;
  socklen_t peer_len = sizeof(peer);
  bool connected =
      sys::getpeername(fd, reinterpret_cast<struct sockaddr*>(&peer), &peer_len) == 0;
  std::unique_ptr<Transport> made;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (State::kConnecting != state()) return transport_.load();
    if (!connected) {
      // Failed: leave SO_ERROR to the kernel; withdraw the offer.
      pending_.reset();
      state_.store(State::kFresh, std::memory_order_release);
      return nullptr;
    }
    made = CompleteOffer(fd, std::move(pending_), pending_reason_);
  }
  SetTransport(std::move(made));
  return transport_.load(std::memory_order_acquire);
}

IoOptions VirtualSocket::SendOptions() const {
  IoOptions io;
  io.nonblocking = nonblocking();
  io.timeout_ns = send_timeout_ns_.load(std::memory_order_relaxed);
  io.spin_ns = GetConfig().spin_us * 1000;
  return io;
}

IoOptions VirtualSocket::RecvOptions() const {
  IoOptions io;
  io.nonblocking = nonblocking();
  io.timeout_ns = recv_timeout_ns_.load(std::memory_order_relaxed);
  io.spin_ns = GetConfig().spin_us * 1000;
  io.recv_lowat = recv_lowat();
  return io;
}

void VirtualSocket::BeforeFork() {
  // Before fork(), in the parent: every transport's count of holders
  // (retired ones too: their Release() in the child counts down).
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& t : retired_) t->BeforeFork();
  if (transport_owner_) transport_owner_->BeforeFork();
}

void VirtualSocket::AfterForkInChild() {
  // In the child, where only this thread exists: no lock (its holder may
  // not exist here).
  for (auto& t : retired_) t->AfterForkInChild();
  if (transport_owner_) transport_owner_->AfterForkInChild();
}

}  // namespace vsocket
