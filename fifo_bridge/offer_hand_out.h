// Hands a sealed offer (ShmSegment::CreateSealedOffer) to the server process
// that accepts the connection, whoever and whichever user that is: the
// segment has no name another user could open, so it travels as a
// descriptor over a Unix connection to an abstract address derived from the
// connection key ("vsk1/O/<key>").  Used when the listener is another
// user's, or sharing with other users is enabled (sharing_policy.h).
//
//   client: before its SYN, OfferHandOut::Start binds the address; the
//           process's liveness watcher thread answers each connection whose
//           peer uid the client's policy allows with the descriptor.
//   server: in accept(), ReceiveHandedOffer connects, checks the client's
//           uid against its own policy, and takes the descriptor.
//
// Several processes may accept on one listener (prefork, nginx workers):
// the one that accepted the TCP connection asks, so each gets its own.
// The segment goes out once; later askers are refused.  An asker is known
// only by its uid: any process of an allowed user that asks before the
// acceptor gets the segment (docs/PROTOCOL.md, "Threat model":
// why sharing across users stays opt-in).
//
// The client's own user is always allowed, so a client hands its offer to
// a worker of its user under another user's listener (Apache's www-data
// workers under a root master) without VSOCKET_SHARE_UIDS.
#ifndef VSOCKET_FIFO_BRIDGE_OFFER_HAND_OUT_H_
#define VSOCKET_FIFO_BRIDGE_OFFER_HAND_OUT_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>

#include "fifo_bridge/liveness_watcher.h"

namespace vsocket::fifo {

class OfferHandOut final : public LivenessTarget {
 public:
  // Binds the hand-out address of `key` and serves a duplicate of
  // `segment_fd` from the watcher thread.  nullptr with *err (-errno) on
  // failure.  Owned by the client's connection; destroying it stops the
  // service (any thread).
  static std::unique_ptr<OfferHandOut> Start(const std::string& key,
                                             int segment_fd, int* err);
  ~OfferHandOut() override;
  OfferHandOut(const OfferHandOut&) = delete;
  OfferHandOut& operator=(const OfferHandOut&) = delete;

  // Watcher thread: answers every pending connection (never blocks).
  void OnSinkEvent() override;
  bool OnLivenessEvent() override { return true; }

 private:
  OfferHandOut(int listen_fd, int segment_fd)
      : listen_fd_(listen_fd), segment_fd_(segment_fd) {}
  const int listen_fd_;   // the bound, listening hand-out address
  const int segment_fd_;  // our own duplicate of the segment's descriptor
  // The segment went out once.  Start's first look and the watcher thread
  // may answer at the same time.
  std::atomic<bool> handed_{false};
};

// Server: takes the sealed offer of `key` from the client's hand-out.
// Returns the received descriptor (>= 0, close-on-exec) and the client's
// uid, or -ENOENT (no hand-out: the client made no such offer), -EACCES
// (the client's uid is not allowed here, or it refused ours), -ETIMEDOUT
// (no answer within `timeout_ms`) or -EPROTO (a malformed answer).
int ReceiveHandedOffer(const std::string& key, int timeout_ms, uid_t* client_uid);

}  // namespace vsocket::fifo

#endif  // VSOCKET_FIFO_BRIDGE_OFFER_HAND_OUT_H_
