// InPlaceView: the state of the explicit API's in-place view of one
// connection (Transport::RecvInPlace / ReleaseInPlace), shared by every
// implementation of it: the copying default (inplace_copy.h), the shm ring
// and the RDMA ring.  The rules it keeps: one view
// per connection; while one is outstanding, or another thread is still
// waiting for data to make one, a second RecvInPlace fails with EBUSY; a
// release must name at most the view's length, and only once the view
// exists.
//
// Threading: not synchronised itself.  REQUIRES: every call made under the
// owner's lock for the connection's view (InPlaceCopy::mu_,
// ShmTransport::inplace_mu_, RdmaTransport::Core::mu).
#ifndef VSOCKET_VSOCKET_INPLACE_VIEW_H_
#define VSOCKET_VSOCKET_INPLACE_VIEW_H_

#include <cstddef>

namespace vsocket {

class InPlaceView {
 public:
  // A RecvInPlace starts: takes the connection's view for the caller, who
  // may then wait for data without the lock.  False (the call fails with
  // EBUSY) when a view is outstanding or being made.
  bool TryBegin() {
    if (taken_) return false;
    taken_ = true;
    len_ = 0;
    return true;
  }
  // The view is the next `len` (> 0) unread bytes.
  // REQUIRES: TryBegin() succeeded and neither Show nor End followed.
  void Show(size_t len) { len_ = len; }
  // No view after all (end of stream, error, timeout), or the release
  // ended it: the connection's view is free again.
  void End() {
    taken_ = false;
    len_ = 0;
  }

  // Taken by a RecvInPlace: shown, or still waiting for data.
  bool taken() const { return taken_; }
  // ReleaseInPlace(n) is valid: a view is shown and `n` is within it.
  bool CanRelease(size_t n) const { return taken_ && len_ != 0 && n <= len_; }
  size_t length() const { return len_; }  // 0 while waiting

 private:
  bool taken_ = false;  // a view is outstanding, or being made
  size_t len_ = 0;      // its length; 0 while still waiting for data
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_INPLACE_VIEW_H_
