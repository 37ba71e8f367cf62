#include "rdma_backend/link_watch.h"

#include <errno.h>
#include <sys/eventfd.h>

#include <atomic>
#include <vector>

#include "base/real_libc.h"
#include "rdma_backend/rdma_stats.h"
#include "vsocket/log.h"

namespace vsocket::rdma {
namespace {

// Running watches by link (For()): guarded by g_mu; leaked (used at exit).
std::mutex g_mu;
std::unordered_map<const RdmaLink*, std::weak_ptr<LinkWatch>>& Running() {
  static auto* m = new std::unordered_map<const RdmaLink*, std::weak_ptr<LinkWatch>>();
  return *m;
}

std::atomic<void (*)(const LinkWatch*)> g_died_hook{nullptr};

}  // namespace

void LinkWatch::SetDiedHook(void (*hook)(const LinkWatch*)) { g_died_hook.store(hook); }

std::shared_ptr<LinkWatch> LinkWatch::Start(std::shared_ptr<RdmaLink> link,
                                            std::weak_ptr<LinkOpenHandler> opens) {
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return nullptr;
  int moved = sys::MovePrivate(efd);
  if (moved >= 0) efd = moved;
  std::shared_ptr<LinkWatch> w(new LinkWatch(std::move(link), std::move(opens), efd));
  w->link_->SetWakeFd(efd);
  int err = Watch(efd, w);
  if (err == 0) err = Watch(w->link_->completion_fd(), w);
  if (err == 0) err = Watch(w->link_->cm_fd(), w);
  if (err != 0) {
    w->Stop();
    errno = -err;
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Running()[w->link_.get()] = w;
  }
  StatsRdmaLinks(1, w->link_->qp_count());
  w->link_->Arm();  // the first completion wakes the thread
  w->OnReadable(efd);  // whatever came before the watch
  return w;
}

std::shared_ptr<LinkWatch> LinkWatch::For(const RdmaLink* link) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Running().find(link);
  return it == Running().end() ? nullptr : it->second.lock();
}

LinkWatch::~LinkWatch() {
  Stop();
  sys::close(wake_fd_);
}

void LinkWatch::Add(uint16_t slot, std::weak_ptr<ProgressWatcher> member) {
  std::lock_guard<std::mutex> lock(mu_);
  members_[slot] = std::move(member);
}

void LinkWatch::Remove(uint16_t slot, const ProgressWatcher* member) {
  bool stop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = members_.find(slot);
    if (it == members_.end()) return;
    std::shared_ptr<ProgressWatcher> m = it->second.lock();
    if (m && m.get() != member) return;
    members_.erase(it);
    stop = retired_ && members_.empty();
  }
  if (stop) Stop();
}

void LinkWatch::Retire() {
  bool stop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retired_ = true;
    stop = members_.empty();
  }
  if (stop) Stop();
}

void LinkWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  link_->SetWakeFd(-1);
  Unwatch(wake_fd_);
  Unwatch(link_->completion_fd());
  Unwatch(link_->cm_fd());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Running().find(link_.get());
    if (it != Running().end() && (it->second.expired() || it->second.lock().get() == this)) {
      Running().erase(it);
    }
  }
  StatsRdmaLinks(-1, -static_cast<int>(link_->qp_count()));
}

bool LinkWatch::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

void LinkWatch::OnReadable(int fd) {
  if (stopped()) return;
  if (fd == wake_fd_) {
    uint64_t n;
    (void)!sys::read(wake_fd_, &n, sizeof(n));
    link_->Poll();
  } else if (fd == link_->cm_fd()) {
    link_->PollCm();
    link_->Poll();
  } else {
    link_->Arm();  // takes the completion event, arms again, polls
  }
  Dispatch();
}

void LinkWatch::Dispatch() {
  std::vector<uint16_t> slots;
  link_->TakeTouched(&slots);
  std::vector<std::shared_ptr<ProgressWatcher>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint16_t slot : slots) {
      auto it = members_.find(slot);
      if (it == members_.end()) continue;
      if (auto m = it->second.lock()) due.push_back(std::move(m));
    }
  }
  // No lock of ours held: a member takes its Core::mu, then the link's.
  for (auto& m : due) m->OnReadable(kLinkEvent);
  if (link_->is_server() && link_->HasOpens()) {
    std::shared_ptr<LinkOpenHandler> handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!retired_) handler = opens_.lock();
    }
    if (handler) {
      handler->OnOpens(link_);
    } else {
      OpenRequest req;
      while (link_->NextOpen(&req)) {
        link_->DeclineOpen(req, link::LinkDeclineCause::kListenerGone);
      }
    }
  }
  if (link_->dead()) {
    VSOCKET_LOG(kDebug, "rdma link %016llx: dead, unwatched",
                static_cast<unsigned long long>(link_->link_id()));
    Stop();
    if (auto hook = g_died_hook.load()) hook(this);
  }
}

}  // namespace vsocket::rdma
