#include "preload_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <random>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "stats_json.h"

extern char** environ;

namespace vsocket_preload_test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Removes the temporary directories when the test binary exits.
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
TempDirs g_temp_dirs;

}  // namespace

std::string RunnerPath() { return VSP_RUNNER_PATH; }

std::string ProgramPath(const std::string& name) {
  return std::string(VSP_PROGRAM_DIR) + "/" + name;
}

std::string TempDir() {
  char tmpl[] = "/tmp/vsocket-preload-test-XXXXXX";
  char* dir = mkdtemp(tmpl);
  if (!dir) return "/tmp";
  g_temp_dirs.dirs.push_back(dir);
  return dir;
}

std::string Exit::ToString() const {
  if (timed_out) return "timed out (killed)";
  if (exited) return "exit " + std::to_string(code);
  return std::string("signal ") + strsignal(signal);
}

std::unique_ptr<Process> Process::Start(const std::vector<std::string>& argv,
                                        const Options& options) {
  std::unique_ptr<Process> p(new Process());
  std::string dir = TempDir();
  p->out_path_ = options.stdout_path.empty() ? dir + "/stdout" : options.stdout_path;
  p->err_path_ = dir + "/stderr";

  // Everything the child needs is built before fork().
  std::vector<std::string> args;
  if (options.preload) {
    args.push_back(RunnerPath());
    args.push_back("--stats");
    for (auto& o : options.run_options) args.push_back(o);
    args.push_back("--");
  }
  for (auto& a : argv) args.push_back(a);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("LD_PRELOAD=", 0) == 0 || kv.rfind("VSOCKET_", 0) == 0) continue;
    env.push_back(kv);
  }
  for (auto& [k, v] : options.env) env.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  std::string in_path = options.stdin_path.empty() ? "/dev/null" : options.stdin_path;

  int out_fd = open(p->out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = open(p->err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int in_fd = open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (out_fd < 0 || err_fd < 0 || in_fd < 0) return nullptr;
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execvpe(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  close(in_fd);
  if (pid < 0) return nullptr;
  setpgid(pid, pid);  // also from here, so a kill right away finds the group
  p->pid_ = pid;
  return p;
}

Process::~Process() {
  if (!reaped_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Process::Running() {
  if (reaped_) return false;
  int status;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_.exited = WIFEXITED(status);
    exit_.code = exit_.exited ? WEXITSTATUS(status) : -1;
    exit_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    kill(-pid_, SIGKILL);  // stray grandchildren
    return false;
  }
  return true;
}

Exit Process::Wait(Ms timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
      reaped_ = true;
      exit_ = Exit();
      exit_.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(Ms(5));
  }
  return exit_;
}

std::string Process::Stdout() const { return Slurp(out_path_); }
std::string Process::Stderr() const { return Slurp(err_path_); }

std::string Process::WaitForLine(Ms timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string out = Stdout();
    size_t nl = out.find('\n');
    if (nl != std::string::npos) return out.substr(0, nl);
    if (!Running() || std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(Ms(5));
  }
}

Result Run(const std::vector<std::string>& argv, const Options& options,
           Ms timeout) {
  Result r;
  auto p = Process::Start(argv, options);
  if (!p) {
    r.err = "could not start " + argv[0];
    return r;
  }
  r.exit = p->Wait(timeout);
  r.out = p->Stdout();
  r.err = p->Stderr();
  return r;
}

// Sums the lines StatsLines() finds (tests/support/stats_json.h) that
// carry a "fallback_reasons" object.  A counter missing from a transport's
// section counts -1, so that an expectation on it fails.
Stats ParseStats(const std::string& text) {
  Stats s;
  for (const vsocket_test::JsonValue& line : vsocket_test::StatsLines(text)) {
    const vsocket_test::JsonValue* reasons = line.Find({"fallback_reasons"});
    if (reasons == nullptr || reasons->kind != vsocket_test::JsonValue::Kind::kObject) continue;
    ++s.lines;
    for (const char* kind : {"shm", "tcp"}) {
      if (line.Find({"transports", kind}) == nullptr) continue;
      bool shm = kind[0] == 's';
      using vsocket_test::StatsNumber;
      (shm ? s.shm_connections : s.tcp_connections) +=
          StatsNumber(line, {"transports", kind, "connections"});
      (shm ? s.shm_sent : s.tcp_sent) += StatsNumber(line, {"transports", kind, "bytes_sent"});
      (shm ? s.shm_received : s.tcp_received) +=
          StatsNumber(line, {"transports", kind, "bytes_received"});
    }
    for (const auto& [name, count] : reasons->object) {
      s.reasons[name] += static_cast<int64_t>(count.number);
    }
  }
  return s;
}

// The port is handed to a server that binds it later (a second or more for
// python3 and torch).  An ephemeral port (bind to 0) could be taken
// meanwhile by any connection of the host as its local port (torch's store
// then failed with EADDRINUSE on a busy host), so the port comes from below
// the ephemeral range, where nothing is handed out by the kernel.
int PickFreePort() {
  int low = 32768;
  {
    std::istringstream range(Slurp("/proc/sys/net/ipv4/ip_local_port_range"));
    range >> low;
  }
  int floor = 10000, ceiling = low > floor + 1000 ? low : 32768;
  static std::mt19937 rng(static_cast<unsigned>(getpid()) * 2654435761u ^
                          static_cast<unsigned>(time(nullptr)));
  for (int attempt = 0; attempt < 200; ++attempt) {
    int port = floor + static_cast<int>(rng() % static_cast<unsigned>(ceiling - floor));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

bool WaitForListener(int port, Ms timeout) {
  char hex[8];
  snprintf(hex, sizeof(hex), ":%04X", port);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::istringstream in(Slurp(table));
      std::string line;
      while (std::getline(in, line)) {
        // "  sl  local_address rem_address   st ..."
        std::istringstream fields(line);
        std::string sl, local, remote, state;
        if (!(fields >> sl >> local >> remote >> state)) continue;
        if (state == "0A" && local.size() > 5 &&
            local.compare(local.size() - 5, 5, hex) == 0) {
          return true;
        }
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Ms(10));
  }
}

std::string ReadFile(const std::string& path) { return Slurp(path); }

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string PatternBytes(size_t size, uint32_t seed) {
  std::string s(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x);
  }
  return s;
}

std::string Sha256Of(const std::string& path) {
  Options o;
  o.preload = false;
  Result r = Run({"sha256sum", path}, o, Ms(20000));
  return r.out.substr(0, r.out.find(' '));
}

std::string Python3() {
  static const std::string path = [] {
    Options o;
    o.preload = false;
    Result r = Run({"python3", "-c", "import sys; print(sys.executable)"}, o,
                   Ms(20000));
    std::string p = r.out.substr(0, r.out.find('\n'));
    return p.empty() ? std::string("python3") : p;
  }();
  return path;
}

}  // namespace vsocket_preload_test
