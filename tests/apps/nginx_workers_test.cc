// nginx as its users run it: the master (root) listens, then forks worker
// processes that accept, running as another user (`user www-data;`, the
// Debian default) or as the master's own user.  Both ends preloaded; curl
// downloads a 1 MiB file (the sha256 must match).
//  - Workers as another user cannot open the offers made to the master's
//    uid: each is declined at once (claim_declined) and the connection runs
//    on kernel TCP.  (Before: curl hung; the offer was only revoked at the
//    claim timeout, and only if curl ever called into the socket.)
//  - Workers as the master's user claim them: shared memory.
#include <sys/stat.h>

#include "app_test.h"

namespace vsocket_preload_test {
namespace {

struct Outcome {
  Result server, curl;
  std::string served, downloaded;
};

Outcome RunMasterWorker(const std::string& worker_user) {
  Outcome o;
  std::string dir = TempDir();
  ::chmod(dir.c_str(), 0755);  // the workers read the file as worker_user
  o.served = dir + "/file.bin";
  o.downloaded = TempDir() + "/download.bin";
  WriteFile(o.served, PatternBytes(1 << 20, 7));
  ::chmod(o.served.c_str(), 0644);
  std::string nginx = FindProgram("nginx");
  auto server = Server::Start(
      [&](int port) {
        WriteFile(dir + "/nginx.conf",
                  "daemon off; user " + worker_user + "; worker_processes 2;\n"
                  "error_log stderr; pid " + dir + "/nginx.pid;\n"
                  "events { worker_connections 256; }\n"
                  "http { access_log off;\n"
                  "  client_body_temp_path " + dir + "/body;\n"
                  "  proxy_temp_path " + dir + "/proxy;\n"
                  "  fastcgi_temp_path " + dir + "/fastcgi;\n"
                  "  server { listen 127.0.0.1:" + std::to_string(port) +
                  "; root " + dir + "; } }\n");
        return std::vector<std::string>{nginx, "-p", dir, "-e", dir + "/error.log",
                                        "-c", dir + "/nginx.conf"};
      },
      Preloaded(true));
  EXPECT_TRUE(server) << "nginx never listened";
  if (!server) return o;
  std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + "/file.bin";
  // -m: a hang fails the test instead of stalling it (kernel TCP: ~ms).
  o.curl = Run({"curl", "-sS", "--fail", "-m", "10", "-o", o.downloaded, url},
               Preloaded(true), Ms(20000));
  o.server = server->Stop(SIGTERM);
  EXPECT_RUN_OK(o.curl);
  EXPECT_EQ(Sha256Of(o.downloaded), Sha256Of(o.served));
  return o;
}

TEST(NginxMasterWorker, WorkersAsAnotherUserDeclineAtOnceAndServeOverTcp) {
  VSA_REQUIRE_PROGRAMS("nginx", "curl");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (nginx switches users)";
  Outcome o = RunMasterWorker("www-data");
  Stats s = ParseStats(o.curl.err);
  EXPECT_EQ(s.Reason("claim_declined"), 1) << o.curl.err;
  EXPECT_GT(s.tcp_received, 1 << 20) << o.curl.err;
}

TEST(NginxMasterWorker, WorkersAsTheSameUserUseSharedMemory) {
  VSA_REQUIRE_PROGRAMS("nginx", "curl");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (nginx's user directive)";
  Outcome o = RunMasterWorker("root");
  ExpectShmPath(o.curl, 1);
  EXPECT_GT(ParseStats(o.curl.err).shm_received, 1 << 20) << o.curl.err;
}

}  // namespace
}  // namespace vsocket_preload_test
