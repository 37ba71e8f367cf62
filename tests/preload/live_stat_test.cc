// vsocket-stat against real preloaded processes (progs/live_pair.c): two
// processes holding busy connections show up with their connections, on
// shared memory, with bytes that grow; -p keeps one process; a client of a
// plain server shows kernel TCP and peer_not_vsocket; a connection
// a rule of the rules file (VSOCKET_CONFIG) puts on kernel TCP shows
// disabled_by_rule and its rule while another port takes shared memory; a
// rule matches on the program's name; a malformed file is one error line
// and the defaults.
#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include "preload_harness.h"
#include "stats_json.h"

namespace vsocket_preload_test {
namespace {

using vsocket_test::JsonValue;

std::string StatPath() {
  std::string runner = RunnerPath();
  return runner.substr(0, runner.rfind('/')) + "/vsocket-stat";
}

// `vsocket-stat --json` (plus `extra`), parsed.
JsonValue StatJson(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {StatPath(), "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Options o;
  o.preload = false;
  Result r = Run(argv, o, Ms(10000));
  EXPECT_TRUE(r.exit.exited) << r.exit.ToString() << r.err;
  auto parsed = vsocket_test::ParseJson(r.out);
  EXPECT_TRUE(parsed.has_value()) << r.out;
  return parsed.value_or(JsonValue{});
}

const JsonValue* ProcessOf(const JsonValue& all, pid_t pid) {
  const JsonValue* list = all.Find({"processes"});
  if (!list) return nullptr;
  for (const JsonValue& p : list->array) {
    const JsonValue* id = p.Find({"pid"});
    if (id && static_cast<pid_t>(id->number) == pid) return &p;
  }
  return nullptr;
}

std::string Str(const JsonValue& v, const char* key) {
  const JsonValue* f = v.Find({key});
  return f ? f->string : "";
}
double Num(const JsonValue& v, const char* key) {
  const JsonValue* f = v.Find({key});
  return f ? f->number : -1;
}

// vsocket-stat --json once every process of `pids` shows an open
// connection (at most 10 s).
JsonValue WaitUntilListed(const std::vector<pid_t>& pids, size_t connections = 1) {
  JsonValue all;
  for (int i = 0; i < 100; ++i) {
    all = StatJson();
    bool every = true;
    for (pid_t pid : pids) {
      const JsonValue* p = ProcessOf(all, pid);
      const JsonValue* conns = p ? p->Find({"connections"}) : nullptr;
      every = every && conns && conns->array.size() >= connections;
    }
    if (every) break;
    usleep(100 * 1000);
  }
  return all;
}

// A server on `count` ports and a client that keeps them busy for
// `seconds`.  `configure` (may be empty) gets the ports before either
// starts, e.g. to write a rules file naming them.  A port PickFreePort gave
// may be taken by another program before the server binds it: then the
// whole start is tried again with new ports.
struct Pair {
  std::unique_ptr<Process> server, client;
  std::vector<int> ports;
};

Pair StartPair(int count, double seconds, const Options& options,
               const std::function<void(const std::vector<int>&)>& configure = {}) {
  Pair p;
  for (int attempt = 0; attempt < 5; ++attempt) {
    p.ports.clear();
    while (static_cast<int>(p.ports.size()) < count) {
      int port = PickFreePort();
      if (std::find(p.ports.begin(), p.ports.end(), port) == p.ports.end())
        p.ports.push_back(port);
    }
    if (configure) configure(p.ports);
    std::vector<std::string> sargv = {ProgramPath("live_pair"), "server"};
    for (int port : p.ports) sargv.push_back(std::to_string(port));
    p.server = Process::Start(sargv, options);
    if (p.server->WaitForLine(Ms(20000)) == "READY") break;
    p.server->Wait(Ms(5000));
    p.server.reset();
  }
  EXPECT_TRUE(p.server) << "the server never listened";
  if (!p.server) return p;
  std::vector<std::string> cargv = {ProgramPath("live_pair"), "client", std::to_string(seconds)};
  for (int port : p.ports) cargv.push_back(std::to_string(port));
  p.client = Process::Start(cargv, options);
  EXPECT_EQ(p.client->WaitForLine(Ms(20000)), "CONNECTED") << p.client->Stderr();
  return p;
}

void Finish(Pair& p) {
  if (!p.server || !p.client) return;
  Exit c = p.client->Wait(Ms(30000));
  Exit s = p.server->Wait(Ms(10000));
  EXPECT_TRUE(c.Ok()) << c.ToString() << p.client->Stderr();
  EXPECT_TRUE(s.Ok()) << s.ToString() << p.server->Stderr();
}

TEST(LiveStat, ShowsBothProcessesOnSharedMemoryWithGrowingBytes) {
  Pair p = StartPair(1, 3.0, Options{});
  ASSERT_TRUE(p.server && p.client);
  int port = p.ports[0];
  // The client printed CONNECTED after its connect; the server may not
  // have accepted yet (its page is made then).
  JsonValue first = WaitUntilListed({p.server->pid(), p.client->pid()});
  usleep(500 * 1000);
  JsonValue second = StatJson();
  for (pid_t pid : {p.server->pid(), p.client->pid()}) {
    const JsonValue* a = ProcessOf(first, pid);
    const JsonValue* b = ProcessOf(second, pid);
    ASSERT_TRUE(a && b) << "pid " << pid << " missing";
    EXPECT_EQ(Str(*a, "program"), "live_pair");
    const JsonValue* conns = b->Find({"connections"});
    ASSERT_TRUE(conns);
    ASSERT_EQ(conns->array.size(), 1u);
    const JsonValue& c = conns->array[0];
    EXPECT_EQ(Str(c, "transport"), "shm");
    EXPECT_EQ(Str(c, "fallback_reason"), "");
    EXPECT_EQ(Str(c, "state"), "established");
    EXPECT_EQ(Str(c, "role"), pid == p.server->pid() ? "server" : "client");
    EXPECT_EQ(Num(c, "ring_bytes"), 1 << 20);
    std::string port_text = ":" + std::to_string(port);
    EXPECT_NE(Str(c, pid == p.server->pid() ? "local" : "peer").find(port_text),
              std::string::npos);
    const JsonValue& c0 = a->Find({"connections"})->array.at(0);
    EXPECT_GT(Num(c, "bytes_sent"), Num(c0, "bytes_sent"));
    EXPECT_GT(Num(c, "bytes_received"), Num(c0, "bytes_received"));
    EXPECT_GT(Num(c, "bytes_sent"), 0);
    EXPECT_GE(vsocket_test::StatsNumber(*b, {"transports", "shm", "connections"}), 1);
  }
  // -p: that process alone; a pid that is not one: exit status 1.
  JsonValue only = StatJson({"-p", std::to_string(p.client->pid())});
  ASSERT_TRUE(only.Find({"processes"}));
  ASSERT_EQ(only.Find({"processes"})->array.size(), 1u);
  EXPECT_TRUE(ProcessOf(only, p.client->pid()));
  Options o;
  o.preload = false;
  Result none = vsocket_preload_test::Run({StatPath(), "-p", "4194000"}, o, Ms(10000));
  EXPECT_EQ(none.exit.code, 1) << none.out;
  // Text mode and a bounded watch run and end by themselves.
  Result watch = vsocket_preload_test::Run({StatPath(), "-w", "0.2", "-c", "2"}, o, Ms(10000));
  EXPECT_TRUE(watch.exit.Ok()) << watch.err;
  EXPECT_NE(watch.out.find("live_pair"), std::string::npos) << watch.out;
  Finish(p);
  // Gone with their processes.
  JsonValue after = StatJson();
  EXPECT_FALSE(ProcessOf(after, p.server->pid()));
  EXPECT_FALSE(ProcessOf(after, p.client->pid()));
}

TEST(LiveStat, FallbackConnectionShowsItsReason) {
  // The server is a plain program: the preloaded client's connection is
  // kernel TCP, peer_not_vsocket; the server has no page at all.
  Options plain;
  plain.preload = false;
  Pair p;
  for (int attempt = 0; attempt < 5 && !p.server; ++attempt) {
    p.ports = {PickFreePort()};
    p.server = Process::Start({ProgramPath("live_pair"), "server", std::to_string(p.ports[0])},
                              plain);
    if (p.server->WaitForLine(Ms(20000)) != "READY") p.server.reset();
  }
  ASSERT_TRUE(p.server);
  p.client = Process::Start(
      {ProgramPath("live_pair"), "client", "1.0", std::to_string(p.ports[0])}, Options{});
  ASSERT_EQ(p.client->WaitForLine(Ms(20000)), "CONNECTED") << p.client->Stderr();
  JsonValue all = WaitUntilListed({p.client->pid()});
  EXPECT_FALSE(ProcessOf(all, p.server->pid()));
  const JsonValue* client = ProcessOf(all, p.client->pid());
  ASSERT_TRUE(client);
  const JsonValue* conns = client->Find({"connections"});
  ASSERT_TRUE(conns && conns->array.size() == 1u);
  EXPECT_EQ(Str(conns->array[0], "transport"), "tcp");
  EXPECT_EQ(Str(conns->array[0], "fallback_reason"), "peer_not_vsocket");
  EXPECT_EQ(Str(conns->array[0], "rule"), "");
  EXPECT_EQ(vsocket_test::StatsNumber(*client, {"fallback_reasons", "peer_not_vsocket"}), 1);
  Finish(p);
}

TEST(LiveStat, WatchStopsOnSigint) {
  Options o;
  o.preload = false;
  auto watch = Process::Start({StatPath(), "--json", "-w", "0.1"}, o);
  EXPECT_FALSE(watch->WaitForLine(Ms(5000)).empty());
  kill(watch->pid(), SIGINT);
  Exit e = watch->Wait(Ms(5000));
  EXPECT_TRUE(e.Ok()) << e.ToString();
}

TEST(LiveStat, RuleForcesTcpOnOnePortAndShmOnAnother) {
  std::string conf = TempDir() + "/vsocket.conf";
  Options options;
  options.env["VSOCKET_CONFIG"] = conf;
  // The first port: kernel TCP by rule (line 2 for the client, 3 for the
  // listener); the second: line 4, auto, so shared memory.
  Pair p = StartPair(2, 1.0, options, [&](const std::vector<int>& ports) {
    WriteFile(conf, "# kernel TCP for one port\n"
                    "tcp * * * *:" + std::to_string(ports[0]) + "\n"
                    "tcp * * *:" + std::to_string(ports[0]) + " *\n"
                    "auto * * * *\n");
  });
  ASSERT_TRUE(p.server && p.client);
  int tcp_port = p.ports[0];
  JsonValue all = WaitUntilListed({p.server->pid(), p.client->pid()}, 2);
  const JsonValue* client = ProcessOf(all, p.client->pid());
  const JsonValue* server = ProcessOf(all, p.server->pid());
  ASSERT_TRUE(client && server);
  EXPECT_EQ(Str(*client, "rules_file"), conf);
  for (const JsonValue* proc : {client, server}) {
    const JsonValue* conns = proc->Find({"connections"});
    ASSERT_TRUE(conns);
    ASSERT_EQ(conns->array.size(), 2u);
    for (const JsonValue& c : conns->array) {
      bool on_tcp_port = Str(c, "local").find(":" + std::to_string(tcp_port)) != std::string::npos ||
                         Str(c, "peer").find(":" + std::to_string(tcp_port)) != std::string::npos;
      if (on_tcp_port) {
        EXPECT_EQ(Str(c, "transport"), "tcp");
        EXPECT_EQ(Str(c, "fallback_reason"), "disabled_by_rule");
        EXPECT_EQ(Str(c, "rule"), conf + (proc == client ? ":2" : ":3"));
      } else {
        EXPECT_EQ(Str(c, "transport"), "shm");
        EXPECT_EQ(Str(c, "rule"), conf + ":4");
      }
    }
  }
  Finish(p);
  Stats cs = ParseStats(p.client->Stderr());
  EXPECT_EQ(cs.Reason("disabled_by_rule"), 1) << p.client->Stderr();
  EXPECT_EQ(cs.shm_connections, 1);
  EXPECT_EQ(cs.tcp_connections, 1);
}

TEST(LiveStat, RuleMatchesProgramName) {
  std::string conf = TempDir() + "/vsocket.conf";
  // The client program alone is told tcp; the server stays as it is.
  WriteFile(conf, "tcp client live_p?ir * *\n"
                  "tcp * some-other-program * *\n");
  Options options;
  options.env["VSOCKET_CONFIG"] = conf;
  Pair p = StartPair(1, 0.3, options);
  ASSERT_TRUE(p.server && p.client);
  Finish(p);
  Stats cs = ParseStats(p.client->Stderr());
  Stats ss = ParseStats(p.server->Stderr());
  EXPECT_EQ(cs.Reason("disabled_by_rule"), 1) << p.client->Stderr();
  EXPECT_EQ(ss.Reason("peer_not_vsocket") + ss.Reason("peer_spoke_tcp") +
                ss.Reason("claim_declined"), 1) << p.server->Stderr();
  EXPECT_EQ(ss.Reason("disabled_by_rule"), 0) << p.server->Stderr();
}

TEST(LiveStat, MalformedRulesFileIsOneLineAndTheDefaults) {
  std::string conf = TempDir() + "/vsocket.conf";
  WriteFile(conf, "tcp * * * *\nshm sideways * * *\n");
  Options options;
  options.env["VSOCKET_CONFIG"] = conf;
  Pair p = StartPair(1, 0.3, options);
  ASSERT_TRUE(p.server && p.client);
  Finish(p);
  for (Process* proc : {p.server.get(), p.client.get()}) {
    std::string err = proc->Stderr();
    std::string line = "vsocket: " + conf + ":2: unknown role 'sideways'";
    size_t at = err.find(line);
    EXPECT_NE(at, std::string::npos) << err;
    EXPECT_EQ(err.find(line, at + 1), std::string::npos) << err;  // once
    Stats s = ParseStats(err);
    EXPECT_EQ(s.shm_connections, 1) << err;  // the whole file was ignored
  }
}

}  // namespace
}  // namespace vsocket_preload_test
