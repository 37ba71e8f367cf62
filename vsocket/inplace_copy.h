// InPlaceCopy: Transport's default for the explicit API's in-place receive
// (Transport::RecvInPlace / ReleaseInPlace, vsocket_recv_inplace), for
// transports whose received bytes live where the application must not look
// (kernel TCP).  One copy: the view is a MSG_PEEK of up to kMaxView bytes
// into a per-connection buffer; releasing n bytes consumes them with
// MSG_TRUNC, which kernel TCP discards without copying (a transport that
// ignores the flag copies them into the same buffer).  Because nothing is
// consumed before the release, ordinary recv, FIONREAD and poll() readiness
// stay exact.
//
// Threading: thread-safe; one view per connection.  A second View() while
// one is outstanding (or still waiting for data) fails with EBUSY.
#ifndef VSOCKET_VSOCKET_INPLACE_COPY_H_
#define VSOCKET_VSOCKET_INPLACE_COPY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "vsocket/inplace_view.h"

namespace vsocket {

class Transport;
struct IoOptions;

class InPlaceCopy {
 public:
  static constexpr size_t kMaxView = 256 * 1024;

  // As Transport::RecvInPlace, through t.RecvMsg.
  ssize_t View(Transport& t, const void** data, size_t max, int flags,
               const IoOptions& io);
  // As Transport::ReleaseInPlace, through t.RecvMsg.
  int Release(Transport& t, size_t n, const IoOptions& io);

 private:
  std::mutex mu_;          // guards the fields below
  InPlaceView view_;
  std::unique_ptr<uint8_t[]> buf_;  // kMaxView bytes, made on first use
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_INPLACE_COPY_H_
