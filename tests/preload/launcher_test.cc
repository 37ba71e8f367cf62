// vsocket-run: options, environment, exit status, library lookup.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "preload_harness.h"

namespace vsocket_preload_test {
namespace {

Result RunLauncher(std::vector<std::string> args,
                   std::map<std::string, std::string> env = {},
                   const std::string& runner = RunnerPath()) {
  Options o;
  o.preload = false;  // we call vsocket-run ourselves
  o.env = std::move(env);
  args.insert(args.begin(), runner);
  return Run(args, o, Ms(20000));
}

std::string LibraryPath() {
  return std::filesystem::path(RunnerPath()).parent_path() / "libvsocket_preload.so";
}

TEST(Launcher, HelpAndUsageErrors) {
  Result r = RunLauncher({"--help"});
  EXPECT_TRUE(r.exit.Ok());
  EXPECT_NE(r.out.find("usage: vsocket-run"), std::string::npos);
  EXPECT_EQ(RunLauncher({}).exit.code, 2);
  EXPECT_EQ(RunLauncher({"--bogus", "--", "true"}).exit.code, 2);
  EXPECT_EQ(RunLauncher({"--transport", "rdma-please", "true"}).exit.code, 2);
  EXPECT_EQ(RunLauncher({"--spin-us", "lots", "true"}).exit.code, 2);
  EXPECT_EQ(RunLauncher({"--log", "loud", "true"}).exit.code, 2);
  EXPECT_EQ(RunLauncher({"--transport"}).exit.code, 2);
}

TEST(Launcher, ExitStatusIsTheProgramsOr127) {
  EXPECT_EQ(RunLauncher({"--", "sh", "-c", "exit 7"}).exit.code, 7);
  EXPECT_EQ(RunLauncher({"sh", "-c", "exit 0"}).exit.code, 0);
  Result r = RunLauncher({"--", "/nonexistent/program"});
  EXPECT_EQ(r.exit.code, 127);
  EXPECT_NE(r.err.find("/nonexistent/program"), std::string::npos);
}

TEST(Launcher, SetsPreloadAndVariables) {
  Result r = RunLauncher({"--transport", "tcp", "--spin-us=0", "--ring-size",
                          "64K", "--stats", "--log", "debug",
                          "--claim-timeout-ms", "500", "--", "sh", "-c",
                          "env; exec /bin/true"},
                         {{"LD_PRELOAD", "/lib/x86_64-linux-gnu/libc.so.6"}});
  ASSERT_TRUE(r.exit.Ok()) << r.err;
  EXPECT_NE(r.out.find("LD_PRELOAD=" + LibraryPath() +
                       ":/lib/x86_64-linux-gnu/libc.so.6\n"),
            std::string::npos) << r.out;
  for (const char* kv : {"VSOCKET_TRANSPORT=tcp\n", "VSOCKET_SPIN_US=0\n",
                         "VSOCKET_RING_SIZE=64K\n", "VSOCKET_STATS=1\n",
                         "VSOCKET_LOG=debug\n", "VSOCKET_CLAIM_TIMEOUT_MS=500\n"}) {
    EXPECT_NE(r.out.find(kv), std::string::npos) << kv << r.out;
  }
  // /bin/true ran preloaded and printed its (empty) statistics.  (env closes
  // stderr at exit, as coreutils programs do, and dash leaves with _exit:
  // neither prints any.)
  EXPECT_GE(ParseStats(r.err).lines, 1) << r.err;
}

TEST(Launcher, OptionsReachTheLibrary) {
  // A 64 KiB ring and no spinning still carry io_blocking's 8 MiB.
  Result r = RunLauncher({"--stats", "--ring-size", "64K", "--spin-us", "0",
                          ProgramPath("io_blocking")});
  EXPECT_TRUE(r.exit.Ok()) << r.out << r.err;
  EXPECT_EQ(ParseStats(r.err).shm_connections, 2) << r.err;
  r = RunLauncher({"--stats", "--transport", "tcp", ProgramPath("io_blocking")});
  EXPECT_TRUE(r.exit.Ok()) << r.out << r.err;
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.tcp_connections, 2) << r.err;
  EXPECT_EQ(s.Reason("disabled_by_config"), 2) << r.err;
}

TEST(Launcher, FindsTheLibraryInDotDotLib) {
  namespace fs = std::filesystem;
  fs::path root = TempDir();
  fs::create_directories(root / "bin");
  fs::create_directories(root / "lib");
  fs::copy_file(RunnerPath(), root / "bin" / "vsocket-run");
  fs::copy_file(LibraryPath(), root / "lib" / "libvsocket_preload.so");
  Result r = RunLauncher({"env"}, {}, (root / "bin" / "vsocket-run").string());
  ASSERT_TRUE(r.exit.Ok()) << r.err;
  std::string expected = fs::canonical(root / "lib" / "libvsocket_preload.so");
  EXPECT_NE(r.out.find("LD_PRELOAD=" + expected + "\n"), std::string::npos) << r.out;
  fs::remove(root / "lib" / "libvsocket_preload.so");
  r = RunLauncher({"env"}, {}, (root / "bin" / "vsocket-run").string());
  EXPECT_EQ(r.exit.code, 127);
  EXPECT_NE(r.err.find("cannot find libvsocket_preload.so"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vsocket_preload_test
