// LinkWatch: the progress thread's watch on one RdmaLink (rdma_backend/
// README.md "Links").  A link's connections share its completion and CM
// descriptors, so the progress thread watches those once per link (not
// once per connection) plus an eventfd that a connection's own poll of the
// link writes when it filed events for *other* connections
// (RdmaLink::SignalTouched).  On any of them it polls the link (arming its
// CQ again) and calls OnReadable(kLinkEvent) of each connection whose slot
// got events (RdmaTransport::Core, which updates its readiness under its
// own lock); on a server link it also hands waiting OPENs to the link's
// LinkOpenHandler (the RDMA listener, rdma_acceptor.cc).  A dead link is
// unwatched once its connections were told.
//
// Threading: thread-safe.  OnReadable runs on the progress thread and takes
// a connection's lock only with no lock of its own held (lock order:
// Core::mu -> RdmaLink::mu_ -> LinkWatch::mu_).
// Ownership: shared_ptr; the registry (link_registry.h) holds it, and it
// holds the link.  Fork: a child never uses its parent's watches.
#ifndef VSOCKET_RDMA_BACKEND_LINK_WATCH_H_
#define VSOCKET_RDMA_BACKEND_LINK_WATCH_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "rdma_backend/progress_thread.h"
#include "rdma_backend/rdma_link.h"

namespace vsocket::rdma {

// The `fd` LinkWatch passes to a member's OnReadable: "your slot got events".
inline constexpr int kLinkEvent = -2;

class LinkOpenHandler {
 public:
  virtual ~LinkOpenHandler() = default;
  // Progress thread: `link` has OPENs waiting (RdmaLink::NextOpen).
  virtual void OnOpens(const std::shared_ptr<RdmaLink>& link) = 0;
};

class LinkWatch : public ProgressWatcher,
                  public std::enable_shared_from_this<LinkWatch> {
 public:
  // Watches `link` on the progress thread; OPENs (server) go to `opens`.
  // nullptr with errno.
  static std::shared_ptr<LinkWatch> Start(std::shared_ptr<RdmaLink> link,
                                          std::weak_ptr<LinkOpenHandler> opens);
  // The running watch of `link`, or nullptr.
  static std::shared_ptr<LinkWatch> For(const RdmaLink* link);
  // Called (progress thread, no lock held) when a watch stopped because its
  // link died, so that its holder drops it at once (its descriptors close
  // when its last connection lets go).  Set once, by the registry.
  static void SetDiedHook(void (*hook)(const LinkWatch*));
  ~LinkWatch() override;

  // Connection `member` owns `slot` of the link from now on / no more.
  // Remove() ignores a slot another member took meanwhile.
  void Add(uint16_t slot, std::weak_ptr<ProgressWatcher> member);
  void Remove(uint16_t slot, const ProgressWatcher* member);

  // Stops watching (idempotent): the link's OPENs are no longer answered.
  void Stop();
  // Server: the listener is gone: declines later OPENs, and stops (the
  // link then closes as its last holder lets go) once no member is left.
  void Retire();
  bool stopped() const;
  const std::shared_ptr<RdmaLink>& link() const { return link_; }

  void OnReadable(int fd) override;

 private:
  LinkWatch(std::shared_ptr<RdmaLink> link, std::weak_ptr<LinkOpenHandler> opens,
            int wake_fd)
      : link_(std::move(link)), opens_(std::move(opens)), wake_fd_(wake_fd) {}
  void Dispatch();

  const std::shared_ptr<RdmaLink> link_;
  const std::weak_ptr<LinkOpenHandler> opens_;
  const int wake_fd_;
  mutable std::mutex mu_;
  bool stopped_ = false;                                           // guarded by mu_
  bool retired_ = false;                                           // guarded by mu_
  std::unordered_map<uint16_t, std::weak_ptr<ProgressWatcher>> members_;  // guarded by mu_
};

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_LINK_WATCH_H_
