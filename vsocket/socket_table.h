// Maps descriptor numbers to the VirtualSocket they refer to.  Several numbers
// may map to one socket (dup).  A descriptor with no entry is not ours and is
// passed to libc untouched.
//
// Thread safety: all functions may be called concurrently.  A socket closed
// by one thread stays valid for another thread that is inside a call on it:
// LookupSocket returns a reference-counted handle; PinSocket, for the data
// path, protects the socket with a hazard slot of the calling thread
// (vsocket/hazard_slots.h) and costs no shared lock and no reference count.
// A socket unregistered while pinned is kept on a retired list and
// destroyed by the thread whose pin ends last, as the last shared_ptr would.
// fork(): the child's table is consistent, and each socket is told once that
// one more process holds it.
#ifndef VSOCKET_VSOCKET_SOCKET_TABLE_H_
#define VSOCKET_VSOCKET_SOCKET_TABLE_H_

#include <memory>
#include <utility>

#include "vsocket/virtual_socket.h"

namespace vsocket {

std::shared_ptr<VirtualSocket> LookupSocket(int fd);
// Registers `fd` (replacing any stale entry).
void RegisterSocket(int fd, std::shared_ptr<VirtualSocket> socket);
// Removes and returns the entry for `fd` (nullptr if none).
std::shared_ptr<VirtualSocket> UnregisterSocket(int fd);

// Lock-free pre-check for hot paths (read/write/close of every descriptor
// under LD_PRELOAD): false means `fd` is certainly not a virtual socket.
bool MaybeVirtualFd(int fd);

// The socket of a descriptor, held for the duration of one call.  Move-only;
// it must end on the thread that made it (it may hold that thread's hazard
// slot).  Empty when the descriptor is not a virtual socket.
class SocketPin {
 public:
  SocketPin() = default;
  SocketPin(SocketPin&& other) noexcept { *this = std::move(other); }
  SocketPin& operator=(SocketPin&& other) noexcept;
  SocketPin(const SocketPin&) = delete;
  SocketPin& operator=(const SocketPin&) = delete;
  ~SocketPin() { Reset(); }

  VirtualSocket* get() const { return socket_; }
  VirtualSocket* operator->() const { return socket_; }
  VirtualSocket& operator*() const { return *socket_; }
  explicit operator bool() const { return socket_ != nullptr; }

 private:
  friend SocketPin PinSocket(int fd);
  SocketPin(VirtualSocket* socket, int slot) : socket_(socket), slot_(slot) {}
  explicit SocketPin(std::shared_ptr<VirtualSocket> owned)
      : socket_(owned.get()), owned_(std::move(owned)) {}
  void Reset();

  VirtualSocket* socket_ = nullptr;
  int slot_ = -1;                         // hazard slot, or -1
  std::shared_ptr<VirtualSocket> owned_;  // the slow path's reference
};

// The data path's lookup: one load of the table and a hazard slot.  Falls
// back to LookupSocket's reference when the thread has no free slot.
SocketPin PinSocket(int fd);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_SOCKET_TABLE_H_
