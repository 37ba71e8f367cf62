// inetd-style servers: a process per connection that gets the socket as its
// stdin/stdout (tcpserver from ucspi-tcp, openbsd-inetd) or on a numbered
// descriptor (progs/reexec_server.c), and execs an ordinary program: cat,
// sha256sum (stdio), a shell script.  Each runs with kernel TCP as the
// reference (nothing preloaded), with both ends preloaded, and with one end
// only; a socat client sends a file and checks what comes back.
//
// With both ends preloaded the connection starts on shared memory.  Placed
// on 0/1 (stdio) it moves to kernel TCP before the exec (the client then
// counts peer_moved_to_tcp); VSOCKET_STDIO=keep leaves it there, for
// programs known to use read(2)/write(2).  On a numbered descriptor it is
// handed to the preloaded image and stays on shared memory, or moves to TCP
// when the new image is not preloaded.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real_programs.h"

namespace vsocket_preload_test {
namespace {

// A client-server case: what the server runs (its argv for a port), what
// the client sends, and what it must read back.
struct Exchange {
  std::string input, expected;
};

// Starts `server_argv(port)`, which serves forever, and runs one socat
// client against it; the server dies with its Process object.
Result RunAgainstForkingServer(
    const std::function<std::vector<std::string>(int)>& server_argv,
    const Options& server_options, Options client_options,
    const Exchange& exchange) {
  std::string dir = TempDir();
  std::string in = dir + "/in.bin", out = dir + "/out.bin";
  WriteFile(in, exchange.input);
  client_options.stdin_path = in;
  client_options.stdout_path = out;
  Result r;
  bool started = false;
  for (int attempt = 0; attempt < 3 && !started; ++attempt) {
    int port = PickFreePort();
    auto server = Process::Start(server_argv(port), server_options);
    if (!server || !WaitForListener(port, Ms(10000))) continue;
    started = true;
    r = Run({"socat", "-t", "20", "-", "TCP:127.0.0.1:" + std::to_string(port)},
            client_options, Ms(40000));
    std::string server_err = server->Stderr();
    EXPECT_TRUE(r.exit.Ok()) << r.exit.ToString() << "\nclient:\n" << r.err
                             << "\nserver:\n" << server_err;
  }
  EXPECT_TRUE(started) << "the server never listened";
  std::string got = ReadFile(out);
  EXPECT_EQ(got.size(), exchange.expected.size());
  EXPECT_TRUE(got == exchange.expected) << "the bytes that came back differ";
  return r;
}

std::string Sha256Line(const std::string& data) {
  std::string dir = TempDir();
  WriteFile(dir + "/x", data);
  return Sha256Of(dir + "/x") + "  -\n";
}

Exchange EchoOf(size_t bytes) {
  std::string data = PatternBytes(bytes, 11);
  return {data, data};
}

Exchange DigestOf(size_t bytes) {
  std::string data = PatternBytes(bytes, 12);
  return {data, Sha256Line(data)};
}

// A shell script: one line through the shell's `read` builtin, then the
// rest counted by wc.
constexpr char kScript[] = "#!/bin/sh\nread line\necho \"got:$line\"\nexec wc -c\n";
Exchange ScriptExchange() {
  std::string rest = PatternBytes(100000, 13);
  for (char& c : rest) {
    if (c == '\n') c = 'x';
  }
  return {"hello\n" + rest, "got:hello\n100000\n"};
}

std::string WriteScript() {
  std::string path = TempDir() + "/service.sh";
  WriteFile(path, kScript);
  chmod(path.c_str(), 0755);
  return path;
}

// Which ends run under vsocket-run.
enum class Ends { kKernel, kBoth, kClientOnly, kServerOnly };

Options ServerOptions(Ends ends) {
  return Preloaded(ends == Ends::kBoth || ends == Ends::kServerOnly);
}
Options ClientOptions(Ends ends) {
  return Preloaded(ends == Ends::kBoth || ends == Ends::kClientOnly);
}

// The client's VSOCKET_STATS, for a service that gets the socket as stdio.
void ExpectStdioPath(Ends ends, const Result& client) {
  Stats s = ParseStats(client.err);
  switch (ends) {
    case Ends::kKernel:
    case Ends::kServerOnly:
      EXPECT_EQ(s.lines, 0) << client.err;
      break;
    case Ends::kClientOnly:
      EXPECT_EQ(s.Reason("peer_not_vsocket"), 1) << client.err;
      break;
    case Ends::kBoth:
      // Shared memory first; the server's child moved it to TCP when it
      // put it on 0 and 1, and the client followed.
      EXPECT_EQ(s.tcp_connections, 1) << client.err;
      EXPECT_EQ(s.shm_connections, 0) << client.err;
      EXPECT_EQ(s.Reason("peer_moved_to_tcp"), 1) << client.err;
      break;
  }
}

// ---- tcpserver (ucspi-tcp) ----

std::function<std::vector<std::string>(int)> TcpserverArgv(
    std::vector<std::string> program) {
  return [program](int port) {
    // -R -H -l0: no ident or DNS lookups (they would connect elsewhere).
    std::vector<std::string> argv = {"tcpserver", "-RHl0", "127.0.0.1",
                                     std::to_string(port)};
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  };
}

class Tcpserver : public testing::TestWithParam<Ends> {};

TEST_P(Tcpserver, Cat) {
  Result r = RunAgainstForkingServer(TcpserverArgv({"cat"}), ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), EchoOf(512 << 10));
  ExpectStdioPath(GetParam(), r);
}

TEST_P(Tcpserver, Sha256sum) {
  Result r = RunAgainstForkingServer(TcpserverArgv({"sha256sum"}),
                                     ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), DigestOf(3 << 20));
  ExpectStdioPath(GetParam(), r);
}

TEST_P(Tcpserver, ShellScript) {
  Result r = RunAgainstForkingServer(TcpserverArgv({WriteScript()}),
                                     ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), ScriptExchange());
  ExpectStdioPath(GetParam(), r);
}

INSTANTIATE_TEST_SUITE_P(Ends, Tcpserver,
                         testing::Values(Ends::kKernel, Ends::kBoth,
                                         Ends::kClientOnly, Ends::kServerOnly));

// VSOCKET_STDIO=keep: cat reads fd 0 with blocking read(2) on shared memory.
TEST(TcpserverKeepingStdio, CatStaysOnSharedMemory) {
  Options server = Preloaded(true), client = Preloaded(true);
  server.env["VSOCKET_STDIO"] = "keep";
  Result r = RunAgainstForkingServer(TcpserverArgv({"cat"}), server, client,
                                     EchoOf(512 << 10));
  ExpectShm(r, 1);
}

// ---- openbsd-inetd ----

std::function<std::vector<std::string>(int)> InetdArgv(std::string program_path,
                                                    std::string argv0) {
  std::string conf = TempDir() + "/inetd.conf";
  struct passwd* pw = getpwuid(geteuid());
  std::string user = pw ? pw->pw_name : "root";
  return [=](int port) {
    WriteFile(conf, "127.0.0.1:" + std::to_string(port) + " stream tcp nowait " +
                        user + " " + program_path + " " + argv0 + "\n");
    // -d: in the foreground, logging to stderr.
    return std::vector<std::string>{"/usr/sbin/inetd", "-d", conf};
  };
}

class Inetd : public testing::TestWithParam<Ends> {};

TEST_P(Inetd, Cat) {
  Result r = RunAgainstForkingServer(InetdArgv("/bin/cat", "cat"), ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), EchoOf(512 << 10));
  ExpectStdioPath(GetParam(), r);
}

TEST_P(Inetd, Sha256sum) {
  Result r = RunAgainstForkingServer(InetdArgv("/usr/bin/sha256sum", "sha256sum"),
                                     ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), DigestOf(3 << 20));
  ExpectStdioPath(GetParam(), r);
}

TEST_P(Inetd, ShellScript) {
  std::string script = WriteScript();
  Result r = RunAgainstForkingServer(InetdArgv(script, "service.sh"),
                                     ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), ScriptExchange());
  ExpectStdioPath(GetParam(), r);
}

INSTANTIATE_TEST_SUITE_P(Ends, Inetd,
                         testing::Values(Ends::kKernel, Ends::kBoth,
                                         Ends::kClientOnly, Ends::kServerOnly));

// ---- a server that re-execs itself with the socket on descriptor 7 ----

std::function<std::vector<std::string>(int)> ReexecArgv(bool plain_child) {
  return [plain_child](int port) {
    std::vector<std::string> argv = {ProgramPath("reexec_server"),
                                     std::to_string(port)};
    if (plain_child) argv.push_back("plain");
    return argv;
  };
}

class Reexec : public testing::TestWithParam<Ends> {};

TEST_P(Reexec, EchoesThroughTheNewImage) {
  Result r = RunAgainstForkingServer(ReexecArgv(false), ServerOptions(GetParam()),
                                     ClientOptions(GetParam()), EchoOf(512 << 10));
  Stats s = ParseStats(r.err);
  switch (GetParam()) {
    case Ends::kKernel:
    case Ends::kServerOnly:
      EXPECT_EQ(s.lines, 0) << r.err;
      break;
    case Ends::kClientOnly:
      EXPECT_EQ(s.Reason("peer_not_vsocket"), 1) << r.err;
      break;
    case Ends::kBoth:
      ExpectShm(r, 1);  // handed over to the preloaded image
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Ends, Reexec,
                         testing::Values(Ends::kKernel, Ends::kBoth,
                                         Ends::kClientOnly, Ends::kServerOnly));

// The re-exec'd image is not preloaded: the connection moves to kernel TCP
// before the exec, with the bytes the server had not read resent.
TEST(ReexecNotPreloaded, MovesToTcpAndKeepsEveryByte) {
  Result r = RunAgainstForkingServer(ReexecArgv(true), Preloaded(true), Preloaded(true),
                                     EchoOf(512 << 10));
  Stats s = ParseStats(r.err);
  EXPECT_EQ(s.tcp_connections, 1) << r.err;
  EXPECT_EQ(s.Reason("peer_moved_to_tcp"), 1) << r.err;
}

}  // namespace
}  // namespace vsocket_preload_test
