#include "peer_harness.h"

#include <unistd.h>

#ifndef VSOCKET_TESTPEER_PATH
#error "VSOCKET_TESTPEER_PATH must name the vsocket_testpeer executable"
#endif

namespace vsocket_test {
namespace {

std::vector<std::string> CommandLine(const PeerSpec& spec, const char* role, int port) {
  std::vector<std::string> argv = {VSOCKET_TESTPEER_PATH};
  if (spec.plain) argv.push_back("--plain");
  argv.insert(argv.end(), {role, "--port", std::to_string(port)});
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  return argv;
}

Started Start(const PeerSpec& spec, const char* role, int port) {
  Started s;
  s.child = Child::Spawn({CommandLine(spec, role, port), spec.env, spec.inherit_fds},
                         &s.error);
  return s;
}

}  // namespace

Record PeerResult::One(std::string_view tag) const {
  for (const Record& r : records) {
    if (r.tag == tag) return r;
  }
  Record none;
  none.tag = "<no " + std::string(tag) + " line>";
  return none;
}

std::vector<Record> PeerResult::All(std::string_view tag) const {
  std::vector<Record> matching;
  for (const Record& r : records) {
    if (r.tag == tag) matching.push_back(r);
  }
  return matching;
}

std::string PeerResult::Describe() const {
  constexpr size_t kTail = 4000;
  std::string tail = err.size() > kTail ? "..." + err.substr(err.size() - kTail) : err;
  return "[" + status.ToString() + "]\n--- stdout ---\n" + out + "--- stderr ---\n" + tail;
}

Started StartServer(const PeerSpec& spec) {
  Started s = Start(spec, "server", 0);
  if (!s.child) return s;
  auto line = s.child->WaitForLine("port", 10s);
  if (line) s.port = ParseRecords(*line).at(0).Int("port");
  if (s.port <= 0) {
    s.error = "server reported no port:\n" + Finish(*s.child, 0ms).Describe();
    s.child.reset();
  }
  return s;
}

Started StartClient(const PeerSpec& spec, int port) {
  return Start(spec, "client", port);
}

PeerResult Finish(Child& child, milliseconds timeout) {
  PeerResult r;
  r.status = child.Wait(timeout);
  r.out = child.Stdout();
  r.err = child.Stderr();
  r.records = ParseRecords(r.out);
  return r;
}

PairResult RunPair(const PeerSpec& server, const PeerSpec& client,
                   milliseconds timeout) {
  PairResult result;
  Started s = StartServer(server);
  if (!s.child) {
    result.error = "server: " + s.error;
    return result;
  }
  Started c = StartClient(client, s.port);
  if (!c.child) {
    result.error = "client: " + c.error;
    return result;
  }
  result.client = Finish(*c.child, timeout);
  result.server = Finish(*s.child, 10s);
  return result;
}

testing::AssertionResult TookPath(const PeerResult& peer, std::string_view path,
                                  std::string_view reason) {
  int conns = 0;
  for (const Record& r : peer.records) {
    if (r.tag != "conn" && r.tag != "done") continue;
    conns += r.tag == "conn";
    if (r.Get("path") != path || r.Get("reason") != reason) {
      return testing::AssertionFailure()
             << "expected path=" << path << " reason=" << reason << ", got " << r.tag
             << " line path=" << r.Get("path") << " reason=" << r.Get("reason")
             << "\n" << peer.Describe();
    }
  }
  if (conns == 0) {
    return testing::AssertionFailure() << "no conn line\n" << peer.Describe();
  }
  return testing::AssertionSuccess();
}

testing::AssertionResult DataIntact(const PeerResult& sender, const PeerResult& receiver,
                                    uint64_t bytes, const std::string& expected_sha256) {
  const Record sent = sender.One("sent");
  const Record got = receiver.One("received");
  const auto want = static_cast<int64_t>(bytes);
  if (sent.Int("bytes") != want || sent.Get("sha256") != expected_sha256 ||
      sent.Has("error")) {
    return testing::AssertionFailure()
           << "sender: expected sent bytes=" << bytes << " sha256=" << expected_sha256
           << ", got bytes=" << sent.Get("bytes") << " sha256=" << sent.Get("sha256")
           << " error=" << sent.Get("error") << "\n" << sender.Describe();
  }
  if (got.Int("bytes") != want || got.Get("sha256") != expected_sha256 ||
      got.Get("end") != "eof") {
    return testing::AssertionFailure()
           << "receiver: expected received bytes=" << bytes << " sha256=" << expected_sha256
           << " end=eof, got bytes=" << got.Get("bytes") << " sha256=" << got.Get("sha256")
           << " end=" << got.Get("end") << "\n" << receiver.Describe();
  }
  return testing::AssertionSuccess();
}

std::string ShmDir(uid_t uid) { return "/dev/shm/vsocket-" + std::to_string(uid); }

Env Auto() { return {{"VSOCKET_TRANSPORT", "auto"}}; }
Env ForceTcp() { return {{"VSOCKET_TRANSPORT", "tcp"}}; }
Env WithStats(Env env) {
  env["VSOCKET_STATS"] = "1";
  return env;
}

}  // namespace vsocket_test
