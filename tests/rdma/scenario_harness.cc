#include "scenario_harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "forked_pair.h"
#include "rdma_device.h"
#include "socket_api.h"

namespace vsocket_rdma_test {

namespace {
unsigned g_pair_alarm_s = 0;  // RunScenarios()'s pair_alarm_s
}  // namespace

int Listen(int* port) {
  return vsocket_test::ListenOn(vsocket_test::VsocketApi(), Addr(SelfIp(), 0), port,
                                {.backlog = 16, .reuse_addr = true});
}

int Connect(int port, int64_t* elapsed_us) {
  return vsocket_test::ConnectTo(vsocket_test::VsocketApi(), Addr(SelfIp(), port),
                                 elapsed_us);
}

int RunPair(const std::function<void(Ctl&)>& server,
            const std::function<void(Ctl&, pid_t server_pid)>& client) {
  vsocket_test::PairStatus st =
      vsocket_test::ForkPair(server, client, {.watchdog_s = g_pair_alarm_s});
  const int ss = st.server.status, cs = st.client.status;
  bool client_ok = st.client.ExitedZero();
  // The kill scenarios end their server with SIGKILL on purpose.
  bool server_ok = st.server.ExitedZero() ||
                   (st.server.started && WIFSIGNALED(ss) && WTERMSIG(ss) == SIGKILL);
  if (!st.error.empty()) fprintf(stderr, "  %s\n", st.error.c_str());
  if (!client_ok) fprintf(stderr, "  client status 0x%x\n", cs);
  if (!server_ok) fprintf(stderr, "  server status 0x%x\n", ss);
  return client_ok && server_ok ? 0 : 1;
}

bool HaveDevice() { return vsocket_test::HaveRdmaDevice(); }

int RunScenarios(int argc, char** argv, std::span<const Scenario> all,
                 unsigned pair_alarm_s) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!HaveDevice()) {
    printf("SKIP: no RDMA device (run in the guest: tests/rdma/run-suite.sh)\n");
    return kSkipExitCode;
  }
  g_pair_alarm_s = pair_alarm_s;
  int passed = 0, failed = 0;
  for (const Scenario& s : all) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted |= !strcmp(argv[i], s.name);
    if (!wanted) continue;
    vsocket_test::g_scope = s.name;
    int64_t start = NowUs();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(s.run());
    int st = 0;
    waitpid(pid, &st, 0);
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("%s %s (%.2f s)\n", ok ? "PASS" : "FAIL", s.name,
           (NowUs() - start) / 1e6);
    (ok ? passed : failed)++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace vsocket_rdma_test
