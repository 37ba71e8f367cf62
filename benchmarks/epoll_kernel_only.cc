// What the interposer costs a wait that holds no vsocket connection.
//
// epoll_wait, poll and select (timeout 0) on sets of pipes, some readable:
// run it plain and under vsocket-run in the same sitting and compare.
//
//   build-release/benchmarks/vsocket-epoll-kernel-only
//   build-release/preload/vsocket-run -- build-release/benchmarks/vsocket-epoll-kernel-only
//
// Instruction counts, which the machine's load does not disturb:
//   valgrind --tool=callgrind --toggle-collect='*Loop*' ... (see BENCHMARKS.md)
// The program makes no socket, so the interposer sees only its waits.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <vector>

#include <benchmark/benchmark.h>

namespace {

// `n` pipes; every other one has a byte to read.
struct Pipes {
  explicit Pipes(int n) {
    for (int i = 0; i < n; ++i) {
      int p[2];
      if (pipe(p) != 0) abort();
      if (i % 2 == 0 && write(p[1], "x", 1) != 1) abort();
      read_ends.push_back(p[0]);
      write_ends.push_back(p[1]);
    }
  }
  ~Pipes() {
    for (int fd : read_ends) close(fd);
    for (int fd : write_ends) close(fd);
  }
  std::vector<int> read_ends, write_ends;
};

__attribute__((noinline)) int EpollWaitLoop(int ep, struct epoll_event* ev, int n,
                                            int64_t rounds) {
  int seen = 0;
  for (int64_t i = 0; i < rounds; ++i) seen += epoll_wait(ep, ev, n, 0);
  return seen;
}

void BM_EpollWait(benchmark::State& state) {
  Pipes pipes(static_cast<int>(state.range(0)));
  int ep = epoll_create1(EPOLL_CLOEXEC);
  for (int fd : pipes.read_ends) {
    struct epoll_event e = {};
    e.events = EPOLLIN;
    e.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
  }
  std::vector<struct epoll_event> ev(pipes.read_ends.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(EpollWaitLoop(ep, ev.data(), static_cast<int>(ev.size()), 1));
  }
  close(ep);
}
BENCHMARK(BM_EpollWait)->Arg(1)->Arg(16)->Arg(256);

__attribute__((noinline)) int PollLoop(struct pollfd* fds, nfds_t n, int64_t rounds) {
  int seen = 0;
  for (int64_t i = 0; i < rounds; ++i) seen += poll(fds, n, 0);
  return seen;
}

void BM_Poll(benchmark::State& state) {
  Pipes pipes(static_cast<int>(state.range(0)));
  std::vector<struct pollfd> fds;
  for (int fd : pipes.read_ends) fds.push_back({fd, POLLIN, 0});
  for (auto _ : state) benchmark::DoNotOptimize(PollLoop(fds.data(), fds.size(), 1));
}
BENCHMARK(BM_Poll)->Arg(1)->Arg(16)->Arg(256);

__attribute__((noinline)) int SelectLoop(const std::vector<int>& fds, int64_t rounds) {
  int seen = 0;
  int top = 0;
  for (int fd : fds) top = fd > top ? fd : top;
  for (int64_t i = 0; i < rounds; ++i) {
    fd_set set;
    FD_ZERO(&set);
    for (int fd : fds) FD_SET(fd, &set);
    struct timeval zero = {0, 0};
    seen += select(top + 1, &set, nullptr, nullptr, &zero);
  }
  return seen;
}

void BM_Select(benchmark::State& state) {
  Pipes pipes(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(SelectLoop(pipes.read_ends, 1));
}
BENCHMARK(BM_Select)->Arg(1)->Arg(16)->Arg(256);

}  // namespace

BENCHMARK_MAIN();
