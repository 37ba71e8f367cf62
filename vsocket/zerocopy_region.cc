#include "vsocket/zerocopy_region.h"

namespace vsocket {

ZeroCopyRegion::Attachment* ZeroCopyRegion::FindOrAttach(
    const void* key, const std::function<std::unique_ptr<Attachment>()>& make) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, attachment] : attachments_) {
    if (k == key) return attachment.get();
  }
  std::unique_ptr<Attachment> made = make();
  if (!made) return nullptr;
  attachments_.emplace_back(key, std::move(made));
  return attachments_.back().second.get();
}

bool ZeroCopyRegion::Use() {
  int n = users_.load(std::memory_order_acquire);
  while (n >= 0) {
    if (users_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel))
      return true;
  }
  return false;
}

bool ZeroCopyRegion::TryRetire() {
  int idle = 0;
  return users_.compare_exchange_strong(idle, -1, std::memory_order_acq_rel);
}

}  // namespace vsocket
