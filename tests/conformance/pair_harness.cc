#include "pair_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exact_io.h"
#include "forked_pair.h"
#include "stream_endpoints.h"
#include "vsocket/vsocket.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern char** environ;

namespace conformance {

namespace {

// $VSOCKET_RDMA_SELF_IP (the guest's rxe address), else loopback.
sockaddr_in Address(int port) { return vsocket_test::Ipv4(vsocket_test::SelfIp(), port); }

// The test, not the shell, decides the configuration: drops every VSOCKET_*
// variable but the guest's address and the log level, then sets the policy.
void Configure(const char* policy) {
  std::vector<std::string> drop;
  for (char** e = environ; *e; ++e) {
    std::string var(*e);
    std::string name = var.substr(0, var.find('='));
    if (name.rfind("VSOCKET_", 0) == 0 && name != "VSOCKET_RDMA_SELF_IP" &&
        name != "VSOCKET_LOG") {
      drop.push_back(name);
    }
  }
  for (const std::string& name : drop) unsetenv(name.c_str());
  if (policy) setenv("VSOCKET_TRANSPORT", policy, 1);
}

int Accept(const SocketApi& api, Ctl& ctl) {
  int port = 0;
  int lfd = vsocket_test::ListenOn(api, Address(0), &port,
                                   {.backlog = 4, .reuse_addr = true});
  ctl.Send(port);
  int fd = api.accept(lfd, nullptr, nullptr);
  CHECK(fd >= 0, "accept");
  CHECK(api.close(lfd) == 0, "close listener");
  return fd;
}

int Connect(const SocketApi& api, Ctl& ctl) {
  int port = static_cast<int>(ctl.Recv());
  return vsocket_test::ConnectTo(api, Address(port));
}

// One end's life inside its child (forked_pair.h arms the watchdog and
// _exit(0)s after it returns).
void RunEnd(const Transport& t, bool server, int ctl_fd, const EndFn& fn) {
  signal(SIGPIPE, SIG_IGN);    // cases that count SIGPIPE install a handler
  Configure(t.policy);
  Ctl ctl{ctl_fd};
  int fd = server ? Accept(*t.api, ctl) : Connect(*t.api, ctl);
  if (t.policy) {
    const char* name = t.api->transport_name(fd);
    const char* why = vsocket_fallback_reason(fd);
    CHECK(name && !strcmp(name, t.policy), "transport %s, want %s (reason %s)",
          name ? name : "(null)", t.policy, why ? why : "(null)");
  }
  End end{*t.api, fd, ctl};
  fn(end);
  end.Barrier();
  if (end.fd >= 0) end.Close();
  fflush(stdout);
#if defined(__SANITIZE_ADDRESS__)
  // _exit() skips LeakSanitizer's exit-time check: run it here.
  if (__lsan_do_recoverable_leak_check()) Fail(__FILE__, __LINE__, "leaks");
#endif
}

}  // namespace

void End::SendAll(const void* buf, size_t len) { vsocket_test::SendAll(api, fd, buf, len); }

void End::RecvAll(void* buf, size_t len) { vsocket_test::RecvAll(api, fd, buf, len); }

void End::SetNonBlocking(bool on) {
  int fl = api.fcntl(fd, F_GETFL, 0);
  CHECK(fl >= 0, "F_GETFL");
  fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  CHECK(api.fcntl(fd, F_SETFL, fl) == 0, "F_SETFL");
  CHECK(((api.fcntl(fd, F_GETFL, 0) & O_NONBLOCK) != 0) == on,
        "F_GETFL after F_SETFL");
}

short End::Poll(short events, int timeout_ms) {
  pollfd p = {fd, events, 0};
  int n = api.poll(&p, 1, timeout_ms);
  CHECK(n >= 0, "poll");
  return n == 0 ? 0 : p.revents;
}

void End::Barrier() {
  ctl.Send(0x0BA4);
  CHECK(ctl.Recv() == 0x0BA4, "barrier out of step");
}

void End::Close() {
  CHECK(api.close(fd) == 0, "close");
  fd = -1;
}

std::string RunPair(const Transport& transport, const char* case_name,
                    const EndFn& server, const EndFn& client,
                    PairOptions options) {
  vsocket_test::g_scope = case_name;
  vsocket_test::PairStatus st = vsocket_test::ForkPair(
      [&](vsocket_test::ControlPair& ctl) { RunEnd(transport, true, ctl.fds[0], server); },
      [&](vsocket_test::ControlPair& ctl, pid_t) {
        RunEnd(transport, false, ctl.fds[1], client);
      },
      {.watchdog_s = options.watchdog_s,
       .deadline_ms = int64_t{options.watchdog_s} * 1000 + 5000});
  if (!st.error.empty()) return st.error;
  return st.server.Describe("server") + st.client.Describe("client");
}

}  // namespace conformance
