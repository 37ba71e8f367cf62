#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

extern char** environ;

namespace vsocket_test {
namespace {

constexpr milliseconds kPollInterval{2};

// Descriptors handed to the child are first moved above this number so the
// dup2 sequence in the child can never overwrite a source it still needs.
constexpr int kHighFd = 200;

std::string ReadWhole(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return {};
  std::string s(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = pread(fd, s.data() + got, s.size() - got, got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  s.resize(got);
  return s;
}

std::vector<std::string> BuildEnv(const std::map<std::string, std::string>& add) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    std::string_view key = kv.substr(0, kv.find('='));
    // VSOCKET_SHM_POOL is the suite's (ctest -L nopool runs tests again
    // with pools off); every other VSOCKET_* is the test's to give.
    if ((key.starts_with("VSOCKET_") && key != "VSOCKET_SHM_POOL") ||
        add.count(std::string(key)))
      continue;
    env.emplace_back(kv);
  }
  for (const auto& [k, v] : add) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ExitStatus::ToString() const {
  std::string s;
  if (timed_out) s += "timed out and killed; ";
  if (exited) return s + "exit code " + std::to_string(code);
  return s + "killed by signal " + std::to_string(signal) + " (" +
         sigabbrev_np(signal) + ")";
}

std::unique_ptr<Child> Child::Spawn(const SpawnOptions& options,
                                    std::string* error) {
  std::unique_ptr<Child> child(new Child);
  child->out_fd_ = memfd_create("child-stdout", MFD_CLOEXEC);
  child->err_fd_ = memfd_create("child-stderr", MFD_CLOEXEC);
  if (child->out_fd_ < 0 || child->err_fd_ < 0) {
    *error = std::string("memfd_create: ") + strerror(errno);
    return nullptr;
  }
  // Several processes (prefork workers) may share stdout: append atomically.
  fcntl(child->out_fd_, F_SETFL, O_APPEND);
  fcntl(child->err_fd_, F_SETFL, O_APPEND);

  std::vector<std::pair<int, int>> moves = {{child->out_fd_, 1},
                                            {child->err_fd_, 2}};
  moves.insert(moves.end(), options.inherit_fds.begin(),
               options.inherit_fds.end());
  std::vector<int> high_fds;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  for (const auto& [from, to] : moves) {
    int high = fcntl(from, F_DUPFD_CLOEXEC, kHighFd);
    high_fds.push_back(high);
    posix_spawn_file_actions_adddup2(&actions, high, to);
  }

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_s = options.argv;
  std::vector<std::string> env_s = BuildEnv(options.env);
  std::vector<char*> argv = CStrings(argv_s);
  std::vector<char*> envp = CStrings(env_s);
  int rc = posix_spawn(&child->pid_, argv[0], &actions, &attr, argv.data(),
                       envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  for (int fd : high_fds) close(fd);
  if (rc != 0) {
    *error = "posix_spawn " + argv_s[0] + ": " + strerror(rc);
    child->reaped_ = true;
    return nullptr;
  }
  return child;
}

Child::~Child() {
  if (pid_ > 0) {
    if (!reaped_) Wait(milliseconds(0));
    kill(-pid_, SIGKILL);  // stray descendants of the group, if any
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

std::string Child::Stdout() const { return ReadWhole(out_fd_); }
std::string Child::Stderr() const { return ReadWhole(err_fd_); }

std::optional<std::string> Child::WaitForLine(std::string_view tag,
                                              milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool exited = Reap(false);  // read output after checking, to not miss it
    std::string out = Stdout();
    size_t start = 0;
    for (size_t nl; (nl = out.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      std::string_view line(out.data() + start, nl - start);
      if (line.substr(0, line.find(' ')) == tag) return std::string(line);
    }
    if (exited || std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

bool Child::Reap(bool block) {
  if (reaped_) return true;
  int wstatus = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &wstatus, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  reaped_ = true;
  if (r > 0 && WIFEXITED(wstatus)) {
    status_.exited = true;
    status_.code = WEXITSTATUS(wstatus);
  } else if (r > 0 && WIFSIGNALED(wstatus)) {
    status_.signal = WTERMSIG(wstatus);
  }
  return true;
}

ExitStatus Child::Wait(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid_, SIGKILL);
      Reap(true);
      status_.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return status_;
}

void Child::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

}  // namespace vsocket_test
