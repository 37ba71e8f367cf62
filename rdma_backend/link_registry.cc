#include "rdma_backend/link_registry.h"

#include <arpa/inet.h>
#include <errno.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "base/after_fork.h"
#include "rdma_backend/link_wire.h"
#include "rdma_backend/rdma_config.h"
#include "vsocket/log.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {
namespace {

struct ClientEntry {
  std::shared_ptr<LinkWatch> watch;
  bool connecting = false;
  uint64_t attempts = 0;  // setups finished
  int failed_errno = 0;   // the last setup's, if it failed
  std::string failed_error;
};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<uint32_t, uint16_t>, ClientEntry> clients;
  std::map<const void*, std::vector<std::shared_ptr<LinkWatch>>> servers;
};

Registry* g_registry = nullptr;  // leaked: links outlive exit handlers

void ForgetInChild() { g_registry = new Registry(); }  // the parent's: leaked

Registry& Get();

// A watch whose link died: nobody may use it, and holding it would keep
// the link's descriptors open until the next setup (kill_loop_test).
void ForgetDead(const LinkWatch* dead) {
  // May hold the link's last reference: released after the unlock.
  std::vector<std::shared_ptr<LinkWatch>> last;
  Registry& r = Get();
  std::unique_lock<std::mutex> lock(r.mu);
  for (auto it = r.clients.begin(); it != r.clients.end();) {
    if (it->second.watch.get() == dead) last.push_back(std::move(it->second.watch));
    if (!it->second.watch && !it->second.connecting) {
      it = r.clients.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [listener, links] : r.servers) {
    for (auto& w : links) {
      if (w.get() == dead) last.push_back(std::move(w));
    }
    std::erase_if(links, [](const std::shared_ptr<LinkWatch>& w) { return !w; });
  }
  lock.unlock();
  last.clear();
}

Registry& Get() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_registry = new Registry();
    ::vsocket::sys::AtFork(nullptr, nullptr, &ForgetInChild);
    LinkWatch::SetDiedHook(&ForgetDead);
  });
  return *g_registry;
}

bool Usable(const std::shared_ptr<LinkWatch>& w) {
  return w && !w->stopped() && !w->link()->dead();
}

}  // namespace

std::shared_ptr<LinkWatch> ClientLink(const sockaddr_in& server,
                                      int64_t deadline_ns, std::string* error) {
  Registry& r = Get();
  auto key = std::make_pair(server.sin_addr.s_addr, server.sin_port);
  std::unique_lock<std::mutex> lock(r.mu);
  ClientEntry* e = &r.clients[key];
  uint64_t seen = e->attempts;
  while (e->connecting) {
    int64_t left = deadline_ns - MonotonicNs();
    if (left <= 0 ||
        r.cv.wait_for(lock, std::chrono::nanoseconds(left)) == std::cv_status::timeout) {
      *error = "waited for another connection's link setup";
      errno = ETIMEDOUT;
      return nullptr;
    }
    e = &r.clients[key];
  }
  if (Usable(e->watch)) return e->watch;
  if (e->attempts != seen && e->failed_errno != 0) {
    *error = e->failed_error;  // the setup we waited for failed
    errno = e->failed_errno;
    return nullptr;
  }
  e->watch.reset();
  e->connecting = true;
  lock.unlock();

  LinkOptions opt;
  opt.qps = GetRdmaConfig().qps_per_link;
  opt.connect_timeout_ns = std::max<int64_t>(deadline_ns - MonotonicNs(), 1);
  std::shared_ptr<RdmaLink> link = RdmaLink::Connect(server, opt, error);
  std::shared_ptr<LinkWatch> watch;
  int err = errno;
  if (link) {
    watch = LinkWatch::Start(std::move(link), {});
    if (!watch) {
      err = errno;
      *error = "cannot watch the link";
    }
  }
  lock.lock();
  e = &r.clients[key];
  e->connecting = false;
  ++e->attempts;
  e->watch = watch;
  e->failed_errno = watch ? 0 : (err != 0 ? err : EIO);
  e->failed_error = watch ? "" : *error;
  r.cv.notify_all();
  if (!watch) errno = e->failed_errno;
  return watch;
}

void DropClientLink(const sockaddr_in& server, const LinkWatch* watch) {
  Registry& r = Get();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.clients.find(std::make_pair(server.sin_addr.s_addr, server.sin_port));
  if (it != r.clients.end() && it->second.watch.get() == watch) {
    it->second.watch.reset();
  }
}

void AddServerLink(const void* listener, std::shared_ptr<LinkWatch> watch) {
  Registry& r = Get();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& links = r.servers[listener];
  std::erase_if(links, [](const std::shared_ptr<LinkWatch>& w) { return w->stopped(); });
  links.push_back(std::move(watch));
}

void RetireServerLinks(const void* listener) {
  std::vector<std::shared_ptr<LinkWatch>> links;
  {
    Registry& r = Get();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.servers.find(listener);
    if (it == r.servers.end()) return;
    links.swap(it->second);
    r.servers.erase(it);
  }
  for (auto& w : links) w->Retire();
}

}  // namespace vsocket::rdma
