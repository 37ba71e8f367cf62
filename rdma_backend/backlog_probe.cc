#include "rdma_backend/backlog_probe.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/real_libc.h"

namespace vsocket::rdma {
namespace {

// States a connection the application has not accepted yet can be in.
constexpr uint32_t kWaitingStates =
    (1u << TCP_SYN_RECV) | (1u << TCP_ESTABLISHED) | (1u << TCP_CLOSE_WAIT);

std::string PeerKey(const inet_diag_msg& m) {
  char ip[INET6_ADDRSTRLEN] = "";
  if (m.idiag_family == AF_INET) {
    inet_ntop(AF_INET, m.id.idiag_dst, ip, sizeof(ip));
  } else {
    in6_addr a;
    std::memcpy(&a, m.id.idiag_dst, sizeof(a));
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      inet_ntop(AF_INET, &a.s6_addr[12], ip, sizeof(ip));
    } else {
      inet_ntop(AF_INET6, &a, ip, sizeof(ip));
    }
  }
  return std::string(ip) + ":" + std::to_string(ntohs(m.id.idiag_dport));
}

// One dump of `family`'s TCP sockets.  False with errno on failure.
bool DumpFamily(int nl, uint8_t family, uint16_t local_port,
                std::set<std::string>* remotes) {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg = {};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.nlh.nlmsg_seq = family;
  msg.req.sdiag_family = family;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = kWaitingStates;
  sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  if (sys::sendto(nl, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel),
                  sizeof(kernel)) != static_cast<ssize_t>(sizeof(msg))) {
    return false;
  }
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    ssize_t n = sys::recv(nl, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    int left = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left);
         h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return true;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        errno = e->error != 0 ? -e->error : EPROTO;
        return false;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
          h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        continue;
      }
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      if (ntohs(m->id.idiag_sport) == local_port) remotes->insert(PeerKey(*m));
    }
    if (n == 0) {
      errno = EPROTO;
      return false;
    }
  }
}

}  // namespace

bool TcpPeersOfPort(uint16_t local_port, std::set<std::string>* remotes) {
  int nl = sys::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return false;
  bool ok = DumpFamily(nl, AF_INET, local_port, remotes) &&
            DumpFamily(nl, AF_INET6, local_port, remotes);
  int err = errno;
  sys::close(nl);
  errno = err;
  return ok;
}

}  // namespace vsocket::rdma
