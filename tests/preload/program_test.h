// Shared by the drivers of the C test programs (progs/): each program runs
// in three modes, so every expectation is checked against the kernel too:
//   shm    - preloaded, VSOCKET_TRANSPORT=auto: both ends share memory
//   tcp    - preloaded, VSOCKET_TRANSPORT=tcp: every call through vsocket,
//            data on kernel TCP
//   kernel - not preloaded at all: the reference behaviour
#ifndef VSOCKET_TESTS_PRELOAD_PROGRAM_TEST_H_
#define VSOCKET_TESTS_PRELOAD_PROGRAM_TEST_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "preload_harness.h"

namespace vsocket_preload_test {

enum class Mode { kShm, kTcp, kKernel };

inline std::string ModeName(const testing::TestParamInfo<Mode>& info) {
  switch (info.param) {
    case Mode::kShm: return "shm";
    case Mode::kTcp: return "tcp";
    case Mode::kKernel: return "kernel";
  }
  return "unknown";
}

inline Result RunProgram(Mode mode, const std::string& name,
                         std::vector<std::string> args = {},
                         Ms timeout = Ms(40000),
                         const std::map<std::string, std::string>& env = {}) {
  Options o;
  o.env = env;
  o.preload = mode != Mode::kKernel;
  if (mode == Mode::kTcp) o.run_options = {"--transport", "tcp"};
  // For programs whose expectations differ by path (exec_inherit).
  o.env["PTEST_MODE"] = mode == Mode::kShm ? "shm" : mode == Mode::kTcp ? "tcp" : "kernel";
  args.insert(args.begin(), ProgramPath(name));
  return Run(args, o, timeout);
}

// The program printed PASS and exited 0.
#define EXPECT_PROGRAM_PASSED(r)                                           \
  do {                                                                     \
    EXPECT_TRUE((r).exit.Ok()) << (r).exit.ToString() << "\nstdout:\n"     \
                               << (r).out << "\nstderr:\n" << (r).err;     \
    EXPECT_NE((r).out.find("PASS"), std::string::npos) << (r).out;         \
  } while (0)

// `connections` connection ends were opened, all on the mode's path.
inline void ExpectPath(Mode mode, const Result& r, int64_t connections) {
  Stats s = ParseStats(r.err);
  switch (mode) {
    case Mode::kShm:
      EXPECT_GE(s.lines, 1) << r.err;
      EXPECT_EQ(s.shm_connections, connections) << r.err;
      EXPECT_EQ(s.tcp_connections, 0) << r.err;
      EXPECT_GT(s.shm_sent, 0) << r.err;
      EXPECT_GT(s.shm_received, 0) << r.err;
      break;
    case Mode::kTcp:
      EXPECT_GE(s.lines, 1) << r.err;
      EXPECT_EQ(s.shm_connections, 0) << r.err;
      EXPECT_EQ(s.tcp_connections, connections) << r.err;
      EXPECT_EQ(s.Reason("disabled_by_config"), connections) << r.err;
      break;
    case Mode::kKernel:
      EXPECT_EQ(s.lines, 0) << r.err;
      break;
  }
}

// The "OBS ..." lines a program printed: what it saw (data, return values,
// errno, poll bits), for comparing a run through vsocket with one on
// kernel TCP line by line.
inline std::vector<std::string> Observations(const std::string& out) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    if (out.compare(pos, 4, "OBS ") == 0) lines.push_back(out.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// Runs `name` through vsocket in `mode` and without it, and expects both to
// pass and to observe the same things.  Returns the run in `mode`.
inline Result RunAndCompareWithKernel(Mode mode, const std::string& name) {
  Result r = RunProgram(mode, name);
  EXPECT_PROGRAM_PASSED(r);
  if (mode == Mode::kKernel) return r;
  Result kernel = RunProgram(Mode::kKernel, name);
  EXPECT_PROGRAM_PASSED(kernel);
  std::vector<std::string> ours = Observations(r.out), theirs = Observations(kernel.out);
  EXPECT_FALSE(theirs.empty()) << kernel.out;
  EXPECT_EQ(ours, theirs) << "through vsocket:\n" << r.out << "\nkernel TCP:\n" << kernel.out;
  return r;
}

#define VSP_ALL_MODES(suite)                                                \
  INSTANTIATE_TEST_SUITE_P(                                                 \
      Modes, suite,                                                         \
      testing::Values(vsocket_preload_test::Mode::kShm,                     \
                      vsocket_preload_test::Mode::kTcp,                     \
                      vsocket_preload_test::Mode::kKernel),                 \
      vsocket_preload_test::ModeName)

}  // namespace vsocket_preload_test

#endif  // VSOCKET_TESTS_PRELOAD_PROGRAM_TEST_H_
