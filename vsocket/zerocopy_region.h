// ZeroCopyRegion: an application buffer registered once for the explicit
// API's zero-copy sends (vsocket_register, include/vsocket/vsocket.h).
//
// The region itself is transport-agnostic: it names [data, data + size).
// A transport that needs per-device state for it (rdma_backend: one memory
// region per protection domain, made the first time the buffer is sent on a
// connection of that device) attaches it with FindOrAttach(); attachments
// live as long as the region and are destroyed with it.
//
// Ownership: the application owns the buffer; vsocket_register() creates the
// region and vsocket_deregister() destroys it.  The buffer must outlive the
// region.
// Threading: thread-safe.  Use() / Unuse() count the sends in flight, so
// that deregistering a region while another thread sends from it fails
// (EBUSY) instead of pulling the memory registration from under the NIC.
#ifndef VSOCKET_VSOCKET_ZEROCOPY_REGION_H_
#define VSOCKET_VSOCKET_ZEROCOPY_REGION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace vsocket {

class ZeroCopyRegion {
 public:
  // Per-transport state attached to a region; destroyed with the region.
  class Attachment {
   public:
    virtual ~Attachment() = default;
  };

  ZeroCopyRegion(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  ~ZeroCopyRegion() = default;  // destroys the attachments
  ZeroCopyRegion(const ZeroCopyRegion&) = delete;
  ZeroCopyRegion& operator=(const ZeroCopyRegion&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // The attachment made for `key` (a transport's per-device object), made by
  // `make` on first use.  `make` runs under the region's lock (it may
  // register memory: a system call, never a wait on the network).  Returns
  // nullptr with errno if `make` fails; nothing is cached then, so a later
  // call tries again.
  Attachment* FindOrAttach(const void* key,
                           const std::function<std::unique_ptr<Attachment>()>& make);

  // A send starts using the region: false (region being deregistered) or
  // true, in which case Unuse() must follow when the send no longer needs
  // the buffer.
  bool Use();
  void Unuse() { users_.fetch_sub(1, std::memory_order_acq_rel); }
  // Marks the region dead if no send uses it: true, after which Use()
  // fails; false while a send is in flight.
  bool TryRetire();

 private:
  const uint8_t* const data_;
  const size_t size_;
  std::atomic<int> users_{0};  // sends in flight; -1 once retired
  std::mutex mu_;              // guards attachments_
  std::vector<std::pair<const void*, std::unique_ptr<Attachment>>> attachments_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_ZEROCOPY_REGION_H_
