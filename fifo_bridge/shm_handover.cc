// The shared-memory half of handing a connection to a new program image
// across exec: ShmLifecycle describes the connection (CanHandOver,
// DescribeForExec, ParseExecFields), ShmTransport::AdoptInherited rebuilds
// it in the new image.  The interposer's half, which chooses the
// connections, clears FD_CLOEXEC and passes VSOCKET_INHERITED, is
// preload/exec_export.cc.
//
// What survives exec and what does not:
//  - descriptors without FD_CLOEXEC survive: the wait socket (the user's),
//    and, once the exporter clears their flag, the segment file (opened
//    again by its name for the occasion: ShmSegment::DescriptorForExec), the
//    SideState memfd (sealed segments only; others keep the SideState in
//    the segment's slot) and the liveness TCP socket (a client's decline
//    sink is useless after the claim and dies with the old image);
//  - mappings, threads and this process's memory do not: the new image maps
//    the segment and the SideState again from those descriptors;
//  - robust mutexes held by threads that exec kills are released by the
//    kernel as owner-dead (SideLock recovers them);
//  - the spinner count of the dying threads is taken out before exec
//    (BeforeExec), and the new image arms the reader whatever the
//    count says, so a stale count costs wake-ups, never a lost one;
//  - the holder count is unchanged: the process that execs still holds the
//    connection.
// Only claimed, non-revoked connections are handed over: an unclaimed
// client offer goes through the ordinary release (see interpose_exec.cc).
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fifo_bridge/shm_lifecycle.h"
#include "fifo_bridge/shm_transport.h"
#include "base/real_libc.h"
#include "vsocket/descriptor_number.h"

namespace vsocket::fifo {

namespace sys = ::vsocket::sys;
namespace {

bool IsRegularFile(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

bool IsSocket(int fd, int type, bool inet) {
  int got_type = 0, domain = 0;
  socklen_t type_len = sizeof(got_type), domain_len = sizeof(domain);
  if (sys::getsockopt(fd, SOL_SOCKET, SO_TYPE, &got_type, &type_len) != 0 ||
      sys::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &domain_len) != 0 ||
      got_type != type) {
    return false;
  }
  return inet ? (domain == AF_INET || domain == AF_INET6) : domain == AF_UNIX;
}

// A private descriptor of the new image: in the private range, close-on-exec.
int MakePrivate(int fd) {
  fd = sys::MovePrivate(fd);
  sys::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

}  // namespace

bool ShmLifecycle::CanHandOver() {
  // The segment's descriptor last: a named one is opened for the occasion.
  return !revoked() && IsClaimed() && channel_.segment() &&
         (channel_.side_in_segment() || channel_.side_fd() >= 0) &&
         channel_.doorbell()->wait_fd() >= 0 &&
         tcp_fd_ >= 0 && channel_.segment()->DescriptorForExec() >= 0;
}

ShmLifecycle::InheritedFds ShmLifecycle::inherited_fds() const {
  InheritedFds fds;
  fds.segment = channel_.segment() ? channel_.segment()->fd() : -1;
  fds.side = channel_.side_fd();
  fds.tcp = tcp_fd_;
  return fds;
}

bool ShmLifecycle::DescribeForExec(std::vector<std::string>* fields,
                                   std::vector<int>* keep_fds) {
  if (!CanHandOver()) return false;
  InheritedFds fds = inherited_fds();
  *fields = {channel_.role() == ShmRole::kClient ? "c" : "s", std::to_string(fds.segment),
             fds.side >= 0 ? std::to_string(fds.side) : "-",
             std::to_string(fds.tcp)};
  *keep_fds = {fds.segment, fds.tcp};
  if (fds.side >= 0) keep_fds->push_back(fds.side);
  return true;
}

bool ShmLifecycle::ParseExecFields(const std::vector<std::string>& f,
                                   ShmRole* role, InheritedFds* fds) {
  if (f.size() != 4 || (f[0] != "c" && f[0] != "s")) return false;
  *role = f[0] == "c" ? ShmRole::kClient : ShmRole::kServer;
  fds->side = -1;
  return ParseDescriptorNumber(f[1], &fds->segment) &&
         (f[2] == "-" || ParseDescriptorNumber(f[2], &fds->side)) &&
         ParseDescriptorNumber(f[3], &fds->tcp);
}

std::unique_ptr<ShmTransport> ShmTransport::AdoptInherited(
    Role role, int user_fd, const InheritedFds& fds, const char** why) {
  bool side_in_segment = fds.side < 0;
  if (!IsRegularFile(fds.segment) ||
      (!side_in_segment && !IsRegularFile(fds.side)) ||
      !IsSocket(fds.tcp, SOCK_STREAM, true) ||
      !IsSocket(user_fd, SOCK_DGRAM, false)) {
    *why = "a descriptor is not of the kind described";
    return nullptr;
  }
  // From here on the private descriptors are ours.
  int side_fd = side_in_segment ? -1 : MakePrivate(fds.side);
  int tcp_fd = MakePrivate(fds.tcp);
  struct sockaddr_storage peer;
  socklen_t peer_len = sizeof(peer);
  std::unique_ptr<ShmSegment> segment;
  auto doorbell = std::make_unique<Doorbell>();
  SideState* side = nullptr;
  auto fail = [&](const char* what) {
    *why = what;
    if (side && !side_in_segment) DestroySideState(side, -1);
    if (side_fd >= 0) sys::close(side_fd);
    doorbell->set_wait_fd(-1);  // the user's: never closed here
    sys::close(tcp_fd);
    return nullptr;
  };
  if (doorbell->AdoptInherited(user_fd, role == ShmRole::kClient ? 'c' : 's') != 0) {
    sys::close(fds.segment);
    return fail("the wait socket is not a connection's");
  }
  // The key names the segment's file: "<my role><key>".
  std::string key = doorbell->my_wake_name().substr(1);
  if (ShmSegment::AdoptInherited(MakePrivate(fds.segment), key, &segment) != 0)
    return fail("the segment is not a valid, claimed vsocket segment");
  if (side_in_segment) {
    // The exporter kept it in the segment's slot, which only a segment
    // private to this user has.
    if (segment->sealed()) return fail("a sealed segment holds no side state");
    side = static_cast<SideState*>(
        segment->side_state_slot(role == ShmRole::kClient));
  } else {
    side = MapInheritedSideState(side_fd);
    if (!side) return fail("the side state is not a sealed page");
  }
  if (sys::getpeername(tcp_fd, reinterpret_cast<struct sockaddr*>(&peer),
                       &peer_len) != 0)
    return fail("the liveness TCP socket is not connected");

  std::unique_ptr<ShmTransport> t =
      Assemble(role, std::move(segment), std::move(doorbell), side, side_fd,
               tcp_fd, /*offer_made_ns=*/0, /*claimed=*/true);
  t->lifecycle_.WatchAdopted();
  // No thread of this image spins yet; a dead thread's count may linger, so
  // ask for wake-ups regardless.  Then the AfterClaim() sequence: a pending
  // flag whose datagram was lost with a dead thread must not stay set.
  t->channel_.rx()->reader_wake.fetch_or(kReaderArmed, std::memory_order_seq_cst);
  t->channel_.rx()->reader_wake.fetch_and(~kReaderPending, std::memory_order_seq_cst);
  if (t->channel_.consumer()->Available() != 0 ||
      (t->channel_.rx()->flags.load(std::memory_order_acquire) &
       (kProducerClosed | kReset))) {
    t->channel_.SignalSelf();
  }
  t->channel_.LiftPeerWriterBlock();
  return t;
}

}  // namespace vsocket::fifo
