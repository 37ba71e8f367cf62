// The new image's half of the exec handover (see exec_handover.h): runs once
// from the library constructor, before main().
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <stddef.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "fifo_bridge/shm_provider.h"
#include "vsocket/provider_registry.h"
#include "preload/descriptors.h"
#include "preload/exec_handover.h"
#include "vsocket/descriptor_number.h"
#include "vsocket/log.h"
#include "vsocket/path_selection.h"
#include "base/real_libc.h"
#include "vsocket/virtual_socket.h"

namespace vsocket::preload {
namespace {


std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// A descriptor number: decimal digits only, below 2^20 ("-1" if allowed).
bool ParseFd(const std::string& text, bool allow_none, int* fd) {
  if (allow_none && text == "-1") {
    *fd = -1;
    return true;
  }
  return ParseDescriptorNumber(text, fd);
}

// The application's numbers of one socket: distinct, open, and the same
// open file as the first.
bool ParseNumbers(const std::string& text, std::vector<int>* fds) {
  struct stat first {};
  for (const std::string& part : Split(text, '+')) {
    int fd;
    struct stat st;
    if (!ParseFd(part, false, &fd) || ::fstat(fd, &st) != 0) return false;
    for (int seen : *fds) {
      if (seen == fd) return false;
    }
    if (fds->empty()) {
      first = st;
    } else if (st.st_dev != first.st_dev || st.st_ino != first.st_ino) {
      return false;
    }
    fds->push_back(fd);
  }
  return !fds->empty();
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
                            const std::vector<std::string>& f,
                            std::vector<int>* named) {
  std::vector<int> fds;
  std::vector<int> private_fds;
  std::vector<std::string> fields;
  if (f.size() >= 2) fields.assign(f.begin() + 1, f.end() - 1);
  if (f.size() < 2 || !provider->ExecDescriptors(fields, &private_fds)) {
    return "malformed connection entry";
  }
  if (!ParseNumbers(f.back(), &fds)) {
    // Still reset what is recognisably a wait socket.
    for (const std::string& part : Split(f.back(), '+')) {
      int fd;
      if (ParseFd(part, false, &fd)) fds.push_back(fd);
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

bool IsListenerMarker(int fd) {
  struct sockaddr_un addr {};
  socklen_t len = sizeof(addr);
  return SocketOption(fd, SO_DOMAIN) == AF_UNIX &&
         SocketOption(fd, SO_TYPE) == SOCK_STREAM &&
         SocketOption(fd, SO_ACCEPTCONN) == 1 &&
         sys::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) == 0 &&
         len >= offsetof(struct sockaddr_un, sun_path) + 8 &&
         addr.sun_path[0] == '\0' && std::memcmp(addr.sun_path + 1, "vsk1/L/", 7) == 0;
}

// "listen,<marker|-1>,<fds>"
const char* AdoptListener(const std::vector<std::string>& f,
                          std::vector<int>* named) {
  std::vector<int> fds;
  int marker = -1;
  if (f.size() != 3 || !ParseFd(f[1], true, &marker) || !ParseNumbers(f[2], &fds))
    return "malformed listener entry";
  if (!IsListeningInetSocket(fds.front())) return "not a listening TCP socket";
  std::vector<int> all = fds;
  if (marker >= 0) all.push_back(marker);
  std::vector<int> entry_named;
  if (!NamedOnce(&entry_named, all)) return "a number appears twice";
  if (!NamedOnce(named, all)) return "a number appears in two entries";
  const char* problem = nullptr;
  if (marker >= 0 && !IsListenerMarker(marker)) {
    problem = "not a listener marker";  // left alone; the listener still works
    marker = -1;
  }
  // The marker is the shared-memory provider's attachment; the others
  // attach afresh, as listen() would have.
  ListenerAttachments attachments;
  if (marker >= 0) {
    marker = sys::MovePrivate(marker);
    sys::fcntl(marker, F_SETFD, FD_CLOEXEC);
    attachments.resize(Providers().size());
    for (size_t i = 0; i < attachments.size(); ++i) {
      if (Providers()[i] == fifo::ShmProvider()) {
        attachments[i] = fifo::AdoptListenerMarker(marker);
        marker = -1;
      }
    }
    if (marker >= 0) sys::close(marker);  // policy: no shared memory
  }
  AttachListeners(fds.front(), /*kernel_listening=*/true, &attachments);
  auto vs = std::make_shared<VirtualSocket>(SocketOption(fds.front(), SO_DOMAIN),
                                            Nonblocking(fds.front()));
  vs->SetListening(std::move(attachments));
  NoteAdoptedSocket(vs, fds);
  return problem;
}

}  // namespace

void AdoptInheritedSockets() {
  const char* value = ::getenv(kInheritedVariable);
  if (!value) return;
  std::string text = value;
  ::unsetenv(kInheritedVariable);  // not for our own children
  std::vector<std::string> entries = Split(text, ';');
  if (entries.front() != "1") {
    VSOCKET_LOG(kWarn, "%s: unknown format \"%.40s\", ignored", kInheritedVariable,
                text.c_str());
    return;
  }
  int failed = 0;
  const char* first_problem = nullptr;
  std::vector<int> named;  // descriptors named by the entries so far
  for (size_t i = 1; i < entries.size(); ++i) {
    std::vector<std::string> fields = Split(entries[i], ',');
    TransportProvider* provider = fields[0] == "listen" ? nullptr
                                  : ProviderNamed(fields[0].c_str());
    if (provider && !(provider->capabilities() & kCapExecHandover)) provider = nullptr;
    const char* problem = provider ? AdoptConnection(provider, fields, &named)
                          : fields[0] == "listen" ? AdoptListener(fields, &named)
                                                  : "unknown entry";
    if (problem) {
      ++failed;
      if (!first_problem) first_problem = problem;
    }
  }
  if (failed) {
    VSOCKET_LOG(kWarn, "%s: %d of %zu entries rejected or degraded (%s)",
                kInheritedVariable, failed, entries.size() - 1, first_problem);
  }
}

}  // namespace vsocket::preload
