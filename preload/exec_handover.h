// Handing virtual sockets to a new program image across exec.
//
// When the image an exec call starts will itself be preloaded with this
// library (LD_PRELOAD in the environment given to the call names
// libvsocket_preload.so), the inherited virtual sockets are described in one
// environment variable added to a copy of that environment:
//
//   VSOCKET_INHERITED=1;<entry>;<entry>...
//   entry: <transport>,<field>,...,<fd>[+<fd>...]
//          a connection of a transport with kCapExecHandover: its
//          provider's name, the fields its Transport::DescribeForExec()
//          wrote, and the application's numbers for it, the first of which
//          becomes Transport::user_fd();
//          listen,<transport|-1>,<field>,...,<fd>[+<fd>...]
//          a listening virtual socket, the provider of the first of its
//          attachments that crosses exec and the fields its
//          ListenerAttachment::DescribeForExec() wrote ("-1" and no
//          fields: none does).  docs/PROTOCOL.md spells out each
//          provider's fields.
//
// Old image (ExecExport, from the exec wrappers): a connection that the new
// image inherits (at least one of its numbers has no FD_CLOEXEC) is not
// released; FD_CLOEXEC is cleared on its private descriptors just before
// the exec system call and restored if the call fails, which then leaves
// every socket exactly as it was.  Everything else (kernel-TCP connections,
// unclaimed offers, sockets nothing inherits, and every socket when the new
// image is not preloaded or when this is a vfork child) gets the release
// described in interpose_exec.cc.
//
// New image (AdoptInheritedSockets, from the library constructor): parses
// and removes the variable, validates every descriptor (kinds, bound names,
// segment header, seals), rebuilds each connection at the same numbers and
// moves the private descriptors back into the private range, close-on-exec.
// An entry that fails is logged (one line for the whole variable) and its
// numbers that are wait sockets are replaced by a socket that reports a
// reset, as a non-preloaded image would see them; descriptors that are not
// what the entry says are never touched.
//
// A listener's other attachments are made afresh in the new image.
// Who owns which descriptor: the application's numbers are the
// application's, before and after.  In the old image the private ones stay
// owned by the transports and listener attachments that own them anyway;
// ExecExport only flips their FD_CLOEXEC, and the kernel carries them into
// the new image, where the provider's AdoptFromExec or
// AdoptListenerFromExec takes them over, and closes those of an entry that
// fails its deeper checks.  A descriptor that is not of the kind its entry says
// is never closed or changed.
//
// Threads: ExecExport belongs to the thread that calls exec; other threads
// may go on using the sockets until the exec kills them.
// AdoptInheritedSockets runs once, on the thread running the library
// constructor, before main(); the adopted connections are then watched by
// the new image's liveness watcher thread.
#ifndef VSOCKET_PRELOAD_EXEC_HANDOVER_H_
#define VSOCKET_PRELOAD_EXEC_HANDOVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsocket/path_selection.h"

namespace vsocket {
class Transport;
class VirtualSocket;
}  // namespace vsocket

namespace vsocket::preload {

inline constexpr char kInheritedVariable[] = "VSOCKET_INHERITED";

class ExecExport {
 public:
  ExecExport() = default;
  ExecExport(const ExecExport&) = delete;
  ExecExport& operator=(const ExecExport&) = delete;

  // Releases or exports every virtual socket for an exec whose new image
  // gets `envp`.  Allocates only when not in a vfork child.
  void Prepare(char* const* envp);
  // The environment to pass to the exec system call.
  char* const* envp() const { return envp_; }
  // Exec failed: give every exported connection back to this image.
  void Abort();

 private:
  struct Exported {
    std::shared_ptr<VirtualSocket> socket;  // kept alive across the call
    Transport* connection = nullptr;        // null for a listener
  };
  bool Export(const std::shared_ptr<VirtualSocket>& vs,
              const std::vector<int>& inherited);
  void ClearCloexec(int fd);

  char* const* envp_ = nullptr;
  std::string variable_;
  std::vector<char*> environment_;
  std::vector<Exported> exported_;
  std::vector<std::pair<int, int>> cloexec_cleared_;  // fd, old F_GETFD
};

// Once, from the library constructor, after InitDescriptors().
void AdoptInheritedSockets();

// Makes the listening TCP socket known by `fds` (numbers of one file, the
// first is the one to attach) a virtual socket: `attachments` as inherited
// (may be empty); every allowed provider without one attaches afresh.
void RegisterListener(const std::vector<int>& fds, ListenerAttachments attachments);
// A listening TCP socket received in an SCM_RIGHTS message
// (descriptor_passing.h): registered as a listener of this process, so
// that its accepts claim offers.  false when `fd` is no such socket or is
// already known.
bool AdoptReceivedListener(int fd);

// Makes `fd` a socket whose first read fails with ECONNRESET, then reads
// return 0 and writes fail with EPIPE (what an inherited shared-memory
// connection becomes in an image that cannot adopt it).
void ReplaceWithResetSocket(int fd);
// A new such socket (close-on-exec), or -1.
int OpenResetSocket();
// True when a provider recognises `fd` as one of its fabric's user
// descriptors (TransportProvider::IsUserDescriptor).
bool IsVsocketWaitSocket(int fd);

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EXEC_HANDOVER_H_
