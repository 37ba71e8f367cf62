// The old image's half of the exec handover (see exec_handover.h).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "preload/descriptors.h"
#include "preload/epoll_set.h"
#include "preload/exec_handover.h"
#include "preload/move_to_tcp.h"
#include "preload/preload_internal.h"
#include "base/real_libc.h"
#include "vsocket/config.h"
#include "vsocket/live_stats.h"
#include "vsocket/provider_registry.h"
#include "vsocket/socket_table.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {

constexpr char kLibraryName[] = "libvsocket_preload.so";

bool IsUnixSocket(int fd) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  return sys::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
         domain == AF_UNIX;
}

// The file name of this library as loaded ("" if unknown).
const char* OwnBaseName() {
  static const char* name = [] {
    Dl_info info;
    if (!::dladdr(reinterpret_cast<void*>(&OwnBaseName), &info) ||
        !info.dli_fname) {
      return "";
    }
    const char* slash = std::strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
  }();
  return name;
}

bool NamesThisLibrary(const char* word, size_t len) {
  const char* base = word;
  for (size_t i = 0; i < len; ++i) {
    if (word[i] == '/') base = word + i + 1;
  }
  size_t base_len = len - static_cast<size_t>(base - word);
  const char* own = OwnBaseName();
  return (base_len == sizeof(kLibraryName) - 1 &&
          std::memcmp(base, kLibraryName, base_len) == 0) ||
         (*own && base_len == std::strlen(own) &&
          std::memcmp(base, own, base_len) == 0);
}

// LD_PRELOAD in `envp` lists this library (words separated by ':' or ' ').
bool PreloadsVsocket(char* const* envp) {
  if (!envp) return false;
  constexpr char kKey[] = "LD_PRELOAD=";
  for (char* const* e = envp; *e; ++e) {
    if (std::strncmp(*e, kKey, sizeof(kKey) - 1) != 0) continue;
    const char* p = *e + sizeof(kKey) - 1;
    while (*p) {
      size_t len = std::strcspn(p, ": ");
      if (len && NamesThisLibrary(p, len)) return true;
      p += len;
      if (*p) ++p;
    }
  }
  return false;
}

bool IsInheritedVariable(const char* entry) {
  size_t n = sizeof(kInheritedVariable) - 1;
  return std::strncmp(entry, kInheritedVariable, n) == 0 && entry[n] == '=';
}

// The treatment of one number that is not handed over: a connection the
// new image inherits moves to kernel TCP first (unless in a vfork child,
// which must not change the parent's tables); then the number is released,
// and replaced by a reset socket if it still is a connection's wait socket
// (the move was impossible).
void ReleaseForExec(int fd, bool shared_memory, FallbackReason reason) {
  int fd_flags = sys::fcntl(fd, F_GETFD);
  bool inherited = fd_flags >= 0 && !(fd_flags & FD_CLOEXEC);
  if (!shared_memory && inherited) MoveConnectionToKernelTcp(fd, reason);
  if (!shared_memory) ForgetDescriptor(fd);
  // A virtual socket's number names an AF_INET/AF_INET6 socket, or the
  // AF_UNIX wait socket of a shared-memory connection.
  if (inherited && IsUnixSocket(fd)) ReplaceWithResetSocket(fd);
}

bool AnyStdio(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (fd <= 2) return true;
  }
  return false;
}

void AppendNumbers(std::string* out, const std::vector<int>& fds) {
  for (size_t i = 0; i < fds.size(); ++i) {
    if (i) *out += '+';
    *out += std::to_string(fds[i]);
  }
}

}  // namespace

int OpenResetSocket() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  char byte = 0;
  sys::send(sv[0], &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  sys::close(sv[1]);  // unread data: the kernel marks sv[0] ECONNRESET
  return sv[0];
}

void ReplaceWithResetSocket(int fd) {
  int reset = OpenResetSocket();
  if (reset < 0) return;
  sys::dup3(reset, fd, 0);
  sys::close(reset);
}

bool IsVsocketWaitSocket(int fd) {
  for (TransportProvider* p : Providers()) {
    if (p->IsUserDescriptor(fd)) return true;
  }
  return false;
}

void ExecExport::Prepare(char* const* envp) {
  envp_ = envp;
  int highest = HighestVirtualFd();
  int saved = errno;
  bool shared_memory = SharesParentMemory();
  if (!shared_memory) {
    LiveStatsBeforeExec();
    // The new image's epoll sets are the kernel's alone.
    EpollSet::ApplyAllPending();
  }
  if (shared_memory || !PreloadsVsocket(envp)) {
    // No allocation here: this may be a vfork child.
    for (int pass = shared_memory ? 1 : 0; pass < 2; ++pass) {
      for (int fd = 0; fd <= highest; ++fd) {
        if (!Ours(fd) || !LookupSocket(fd)) continue;
        if (pass == 0 && !HasUnreadRingBytes(fd)) continue;
        ReleaseForExec(fd, shared_memory, FallbackReason::kExecNotPreloaded);
      }
    }
    errno = saved;
    return;
  }
  // Group the numbers by socket, in the order of their lowest number.
  struct Group {
    std::shared_ptr<VirtualSocket> socket;
    std::vector<int> all, inherited;
  };
  std::vector<Group> groups;
  std::map<VirtualSocket*, size_t> index;
  for (int fd = 0; fd <= highest; ++fd) {
    if (!Ours(fd)) continue;
    auto vs = LookupSocket(fd);
    if (!vs) continue;
    auto [it, added] = index.emplace(vs.get(), groups.size());
    if (added) groups.push_back({vs, {}, {}});
    Group& g = groups[it->second];
    g.all.push_back(fd);
    int fd_flags = sys::fcntl(fd, F_GETFD);
    if (fd_flags >= 0 && !(fd_flags & FD_CLOEXEC)) g.inherited.push_back(fd);
  }
  std::stable_partition(groups.begin(), groups.end(), [](const Group& g) {
    return HasUnreadRingBytes(g.all.front());
  });
  for (Group& g : groups) {
    // A connection the new image gets as 0, 1 or 2 is for its stdio, which
    // bypasses the interposer: it goes as kernel TCP.
    bool stdio = GetConfig().stdio_on_tcp && AnyStdio(g.inherited);
    if (g.inherited.empty() || stdio || !Export(g.socket, g.inherited)) {
      for (int fd : g.all) {
        ReleaseForExec(fd, false,
                       stdio ? FallbackReason::kStdioDescriptor
                             : FallbackReason::kExecNotPreloaded);
      }
    }
  }
  bool stale = false;
  for (char* const* e = envp; e && *e; ++e) stale |= IsInheritedVariable(*e);
  if (!exported_.empty() || stale) {
    for (char* const* e = envp; e && *e; ++e) {
      if (!IsInheritedVariable(*e)) environment_.push_back(*e);
    }
    if (!exported_.empty()) environment_.push_back(variable_.data());
    environment_.push_back(nullptr);
    envp_ = environment_.data();
  }
  // Last, as close to the exec as possible: the threads of this image that
  // busy-poll a connection die with the exec.
  for (Exported& e : exported_) {
    if (e.connection) e.connection->BeforeExec();
  }
  errno = saved;
}

bool ExecExport::Export(const std::shared_ptr<VirtualSocket>& vs,
                        const std::vector<int>& inherited) {
  std::string entry;
  Exported exported{vs};
  if (vs->state() == VirtualSocket::State::kListening) {
    // The first attachment that crosses exec goes with its provider's
    // name; the others attach afresh in the new image.
    entry = "listen,-1,";
    const ListenerAttachments& attachments = vs->listeners();
    for (size_t i = 0; i < attachments.size() && i < Providers().size(); ++i) {
      std::vector<std::string> fields;
      std::vector<int> keep;
      if (!attachments[i] || !attachments[i]->DescribeForExec(&fields, &keep)) continue;
      for (int fd : keep) ClearCloexec(fd);
      entry = std::string("listen,") + Providers()[i]->name() + ",";
      for (const std::string& field : fields) entry += field + ",";
      break;
    }
  } else if (vs->state() == VirtualSocket::State::kConnected) {
    Transport* t = vs->TransportFinishingConnect(inherited.front());
    // Kernel TCP needs nothing (the descriptor is the connection); a
    // transport that cannot be handed over (an unclaimed offer, RDMA) gets
    // the ordinary release.
    if (!t || !(t->capabilities() & kCapExecHandover)) return false;
    std::vector<std::string> fields;
    std::vector<int> keep;
    if (!t->DescribeForExec(&fields, &keep)) return false;
    for (int fd : keep) ClearCloexec(fd);
    entry = std::string(TransportKindName(t->kind())) + ",";
    for (const std::string& field : fields) entry += field + ",";
    exported.connection = t;
  } else {
    return false;
  }
  AppendNumbers(&entry, inherited);
  if (variable_.empty()) variable_ = std::string(kInheritedVariable) + "=1";
  variable_ += ";" + entry;
  exported_.push_back(std::move(exported));
  return true;
}

void ExecExport::ClearCloexec(int fd) {
  int fd_flags = sys::fcntl(fd, F_GETFD);
  if (fd_flags < 0 || !(fd_flags & FD_CLOEXEC)) return;
  if (sys::fcntl(fd, F_SETFD, fd_flags & ~FD_CLOEXEC) == 0)
    cloexec_cleared_.emplace_back(fd, fd_flags);
}

void ExecExport::Abort() {
  int saved = errno;
  LiveStatsAfterFailedExec();
  for (Exported& e : exported_) {
    if (e.connection) e.connection->AfterFailedExec();
  }
  for (auto [fd, fd_flags] : cloexec_cleared_) sys::fcntl(fd, F_SETFD, fd_flags);
  exported_.clear();
  cloexec_cleared_.clear();
  errno = saved;
}

}  // namespace vsocket::preload
