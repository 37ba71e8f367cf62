// apache2 as Debian ships it: the event MPM, started by root, whose worker
// processes run as www-data (APACHE_RUN_USER) and accept on the listener the
// root master made.  Debian's /etc/apache2 is copied unchanged but for the
// port (ports.conf and the default site) and the run, lock and log
// directories; a 1 MiB file is served from /var/www/html.  Both ends are
// preloaded.
//
// The accepting process decides (docs/PROTOCOL.md, "Server: accept()"):
//  - curl as www-data, the workers' own user: shared memory, without
//    VSOCKET_SHARE_UIDS.  Before, the client judged by the listener's user
//    (root) and stayed on TCP (uid_mismatch), and the workers counted it
//    peer_not_vsocket.
//  - curl as root: kernel TCP, named uid_mismatch on both ends (not
//    claim_declined, not peer_not_vsocket), with the advice line that says
//    how to share.
//  - the same downloads on kernel TCP (nothing preloaded) as the reference.
#include <sys/stat.h>

#include <fstream>

#include "app_test.h"

namespace vsocket_preload_test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Replaces every `from` in the file at `path` by `to`.
void Rewrite(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = ReadFile(path);
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  WriteFile(path, text);
}

struct ApacheOutcome {
  Result server, curl;
  std::string error_log;
  bool same_bytes = false;
};

// One download of a fresh 1 MiB file through apache2 (preloaded when
// `preloaded`) by curl running as `client_user`.
ApacheOutcome RunApache(bool preloaded, const std::string& client_user) {
  ApacheOutcome o;
  std::string dir = TempDir();
  std::string conf = dir + "/apache2";
  EXPECT_EQ(system(("cp -a /etc/apache2 " + conf).c_str()), 0);
  for (const char* sub : {"/run", "/lock", "/log"}) ::mkdir((dir + sub).c_str(), 0755);
  std::string name = "vsocket-" + std::to_string(::getpid()) + ".bin";
  std::string served = "/var/www/html/" + name;
  std::string downloaded = dir + "/download.bin";
  WriteFile(served, PatternBytes(1 << 20, 11));
  ::chmod(served.c_str(), 0644);

  Options options = Preloaded(preloaded);
  options.env["APACHE_CONFDIR"] = conf;
  options.env["APACHE_RUN_USER"] = "www-data";
  options.env["APACHE_RUN_GROUP"] = "www-data";
  options.env["APACHE_PID_FILE"] = dir + "/run/apache2.pid";
  options.env["APACHE_RUN_DIR"] = dir + "/run";
  options.env["APACHE_LOCK_DIR"] = dir + "/lock";
  options.env["APACHE_LOG_DIR"] = dir + "/log";
  options.env["LANG"] = "C";
  std::string apache2 = FindProgram("apache2");
  auto server = Server::Start(
      [&](int port) {
        std::string p = std::to_string(port);
        system(("cp /etc/apache2/ports.conf " + conf + "/ports.conf").c_str());
        system(("cp /etc/apache2/sites-available/000-default.conf " + conf +
                "/sites-available/000-default.conf").c_str());
        Rewrite(conf + "/ports.conf", "Listen 80", "Listen 127.0.0.1:" + p);
        Rewrite(conf + "/sites-available/000-default.conf", "*:80", "*:" + p);
        return std::vector<std::string>{apache2, "-d", conf, "-DFOREGROUND"};
      },
      options);
  EXPECT_TRUE(server) << "apache2 never listened";
  if (server) {
    std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + "/" + name;
    std::vector<std::string> curl = {"curl", "-sS", "--fail", "-m", "10", "-o", downloaded, url};
    if (client_user != "root") {
      curl.insert(curl.begin(), {"setpriv", "--reuid=" + client_user,
                                 "--regid=" + client_user, "--clear-groups", "--"});
      ::chmod(dir.c_str(), 0777);  // curl writes the download as that user
    }
    o.curl = Run(curl, Preloaded(preloaded), Ms(20000));
    // SIGTERM: the master stops its workers, which exit normally (their
    // statistics go to the error log, apache's stderr).
    o.server = server->Stop(SIGTERM);
    EXPECT_RUN_OK(o.curl);
    o.same_bytes = ReadFile(downloaded) == ReadFile(served);
  }
  ::unlink(served.c_str());
  o.error_log = ReadFile(dir + "/log/error.log");
  return o;
}

TEST(ApacheEventMpm, KernelTcpReference) {
  VSA_REQUIRE_PROGRAMS("apache2", "curl", "setpriv");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (apache2 switches users)";
  ApacheOutcome o = RunApache(false, "www-data");
  EXPECT_TRUE(o.same_bytes) << Describe(o.curl);
}

TEST(ApacheEventMpm, ClientsOfTheWorkersUserShareMemory) {
  VSA_REQUIRE_PROGRAMS("apache2", "curl", "setpriv");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (apache2 switches users)";
  ApacheOutcome o = RunApache(true, "www-data");
  EXPECT_TRUE(o.same_bytes) << Describe(o.curl);
  ExpectShmPath(o.curl, 1);
  EXPECT_GT(ParseStats(o.curl.err).shm_received, 1 << 20) << o.curl.err;
  // The workers' own statistics, where they exited normally: no preloaded
  // client is ever peer_not_vsocket.
  Stats workers = ParseStats(o.error_log);
  EXPECT_GE(workers.lines, 1) << o.error_log;
  EXPECT_GE(workers.shm_connections, 1) << o.error_log;
  EXPECT_EQ(workers.Reason("peer_not_vsocket"), 0) << o.error_log;
}

TEST(ApacheEventMpm, ClientsOfAnotherUserAreNamedUidMismatchWithAdvice) {
  VSA_REQUIRE_PROGRAMS("apache2", "curl", "setpriv");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (apache2 switches users)";
  ApacheOutcome o = RunApache(true, "root");
  EXPECT_TRUE(o.same_bytes) << Describe(o.curl);
  Stats c = ParseStats(o.curl.err);
  EXPECT_EQ(c.shm_connections, 0) << o.curl.err;
  EXPECT_EQ(c.Reason("uid_mismatch"), 1) << o.curl.err;
  EXPECT_GT(c.tcp_received, 1 << 20) << o.curl.err;
  EXPECT_NE(o.curl.err.find("for uid_mismatch: the peer runs as another user; to share "
                            "memory with it, list each other's user on both ends: "
                            "VSOCKET_SHARE_UIDS="),
            std::string::npos)
      << o.curl.err;
  Stats workers = ParseStats(o.error_log);
  EXPECT_GE(workers.lines, 1) << o.error_log;
  EXPECT_EQ(workers.Reason("uid_mismatch"), 1) << o.error_log;
  EXPECT_EQ(workers.Reason("peer_not_vsocket"), 0) << o.error_log;
  EXPECT_EQ(workers.shm_connections, 0) << o.error_log;
}

}  // namespace
}  // namespace vsocket_preload_test
