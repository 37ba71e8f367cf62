// The new image's half of the exec handover (see exec_handover.h): runs once
// from the library constructor, before main().
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "vsocket/provider_registry.h"
#include "preload/descriptors.h"
#include "preload/exec_handover.h"
#include "preload/inherited_variable.h"
#include "preload/preload_internal.h"
#include "vsocket/log.h"
#include "vsocket/path_selection.h"
#include "base/real_libc.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {


// The application's numbers of one socket: distinct, open, and the same
// open file as the first.
bool ParseNumbers(const std::string& text, std::vector<int>* fds) {
  if (!ParseInheritedFdList(text, fds)) return false;
  struct stat first {};
  for (size_t i = 0; i < fds->size(); ++i) {
    struct stat st;
    if (::fstat((*fds)[i], &st) != 0) return false;
    if (i == 0) {
      first = st;
    } else if (st.st_dev != first.st_dev || st.st_ino != first.st_ino) {
      return false;
    }
  }
  return true;
}

int SocketOption(int fd, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  if (sys::getsockopt(fd, SOL_SOCKET, name, &value, &len) != 0) return -1;
  return value;
}

int64_t TimeoutNs(int fd, int name) {
  struct timeval tv {};
  socklen_t len = sizeof(tv);
  if (sys::getsockopt(fd, SOL_SOCKET, name, &tv, &len) != 0) return -1;
  int64_t ns = int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000;
  return ns == 0 ? -1 : ns;
}

bool Nonblocking(int fd) {
  int fl = sys::fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK);
}

// The numbers of an entry that failed: wait sockets among them get the
// reset socket, as in an image that cannot adopt them.
void GiveUp(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (IsVsocketWaitSocket(fd)) ReplaceWithResetSocket(fd);
  }
}

// Every descriptor may appear in one entry only (a hostile variable could
// otherwise make two objects own one descriptor).  Returns false if one of
// `fds` was named before; records them all otherwise.
bool NamedOnce(std::vector<int>* named, const std::vector<int>& fds) {
  for (int fd : fds) {
    for (int seen : *named) {
      if (fd == seen) return false;
    }
  }
  named->insert(named->end(), fds.begin(), fds.end());
  return true;
}

// "<transport>,<fields...>,<fds>" (exec_handover.h)
const char* AdoptConnection(TransportProvider* provider,
                            const InheritedEntry& entry,
                            std::vector<int>* named) {
  std::vector<int> fds;
  std::vector<int> private_fds;
  const std::vector<std::string>& fields = entry.fields;
  if (entry.field_count < 2 || !provider->ExecDescriptors(fields, &private_fds)) {
    return "malformed connection entry";
  }
  if (!ParseNumbers(entry.numbers, &fds)) {
    // Still reset what is recognisably a wait socket.
    fds.clear();
    for (const std::string& part : SplitInherited(entry.numbers, '+')) {
      int fd;
      if (ParseInheritedFd(part, false, &fd)) fds.push_back(fd);
    }
    GiveUp(fds);
    return "bad descriptor numbers";
  }
  std::vector<int> all = fds;
  all.insert(all.end(), private_fds.begin(), private_fds.end());
  std::vector<int> entry_named;
  if (!NamedOnce(&entry_named, all)) {
    GiveUp(fds);
    return "a number appears twice";
  }
  if (!NamedOnce(named, all)) return "a number appears in two entries";
  const char* why = nullptr;
  std::unique_ptr<Transport> transport =
      provider->AdoptFromExec(fields, fds.front(), &why);
  if (!transport) {
    GiveUp(fds);
    return why;
  }
  int tcp_fd = transport->tcp_fd();
  auto vs = std::make_shared<VirtualSocket>(SocketOption(tcp_fd, SO_DOMAIN),
                                            Nonblocking(tcp_fd));
  vs->set_recv_timeout_ns(TimeoutNs(tcp_fd, SO_RCVTIMEO));
  vs->set_send_timeout_ns(TimeoutNs(tcp_fd, SO_SNDTIMEO));
  // The old image's SO_RCVLOWAT is the kernel socket's (the shared-memory
  // side keeps its own copy of the mark in its SideState).
  if (int lowat = SocketOption(tcp_fd, SO_RCVLOWAT); lowat > 1)
    vs->NoteRecvLowat(static_cast<uint32_t>(lowat));
  vs->SetTransport(std::move(transport));
  NoteAdoptedSocket(vs, fds);
  return nullptr;
}

bool IsListeningInetSocket(int fd) {
  int domain = SocketOption(fd, SO_DOMAIN);
  return (domain == AF_INET || domain == AF_INET6) &&
         SocketOption(fd, SO_TYPE) == SOCK_STREAM &&
         SocketOption(fd, SO_ACCEPTCONN) == 1;
}

// "listen,-1,<fds>" or "listen,<transport>,<field>...,<fds>"
const char* AdoptListener(const InheritedEntry& entry,
                          std::vector<int>* named) {
  std::vector<int> fds;
  std::vector<int> private_fds;
  bool described = entry.field_count >= 3 && entry.fields[0] != "-1";
  TransportProvider* provider = described ? ProviderNamed(entry.fields[0].c_str())
                                          : nullptr;
  if (provider && !(provider->capabilities() & kCapExecHandover)) provider = nullptr;
  std::vector<std::string> fields;
  if (provider) fields.assign(entry.fields.begin() + 1, entry.fields.end());
  if (entry.field_count < 3 || (!described && entry.field_count != 3) ||
      (described && (!provider || !provider->ListenerExecDescriptors(fields, &private_fds))) ||
      !ParseNumbers(entry.numbers, &fds))
    return "malformed listener entry";
  if (!IsListeningInetSocket(fds.front())) return "not a listening TCP socket";
  std::vector<int> all = fds;
  all.insert(all.end(), private_fds.begin(), private_fds.end());
  std::vector<int> entry_named;
  if (!NamedOnce(&entry_named, all)) return "a number appears twice";
  if (!NamedOnce(named, all)) return "a number appears in two entries";
  // The described attachment is adopted; the others attach afresh, as
  // listen() would have.  One that fails its checks is left alone: the
  // listener still works.
  const char* problem = nullptr;
  ListenerAttachments attachments;
  if (provider) {
    attachments.resize(Providers().size());
    for (size_t i = 0; i < attachments.size(); ++i) {
      if (Providers()[i] == provider)
        attachments[i] = provider->AdoptListenerFromExec(fields, &problem);
    }
  }
  RegisterListener(fds, std::move(attachments));
  return problem;
}

}  // namespace

void RegisterListener(const std::vector<int>& fds, ListenerAttachments attachments) {
  uint32_t rule_line = 0;
  AttachListeners(fds.front(), /*kernel_listening=*/true, &attachments, &rule_line);
  auto vs = std::make_shared<VirtualSocket>(SocketOption(fds.front(), SO_DOMAIN),
                                            Nonblocking(fds.front()));
  vs->set_rule_line(rule_line);
  vs->SetListening(std::move(attachments));
  NoteAdoptedSocket(vs, fds);
}

bool AdoptReceivedListener(int fd) {
  if (Ours(fd) || !IsListeningInetSocket(fd)) return false;
  RegisterListener({fd}, {});
  return true;
}

void AdoptInheritedSockets() {
  const char* value = ::getenv(kInheritedVariable);
  if (!value) return;
  std::string text = value;
  ::unsetenv(kInheritedVariable);  // not for our own children
  std::vector<InheritedEntry> entries;
  if (!ParseInheritedVariable(text, &entries)) {
    VSOCKET_LOG(kWarn, "%s: unknown format \"%.40s\", ignored", kInheritedVariable,
                text.c_str());
    return;
  }
  int failed = 0;
  const char* first_problem = nullptr;
  std::vector<int> named;  // descriptors named by the entries so far
  for (const InheritedEntry& entry : entries) {
    bool listener = entry.kind == "listen";
    TransportProvider* provider = listener ? nullptr
                                  : ProviderNamed(entry.kind.c_str());
    if (provider && !(provider->capabilities() & kCapExecHandover)) provider = nullptr;
    const char* problem = provider ? AdoptConnection(provider, entry, &named)
                          : listener ? AdoptListener(entry, &named)
                                     : "unknown entry";
    if (problem) {
      ++failed;
      if (!first_problem) first_problem = problem;
    }
  }
  if (failed) {
    VSOCKET_LOG(kWarn, "%s: %d of %zu entries rejected or degraded (%s)",
                kInheritedVariable, failed, entries.size(), first_problem);
  }
}

}  // namespace vsocket::preload
