// The per-connection behaviours of vsocket_testpeer ("modes"). A mode runs on
// one connected socket, whichever role (client/server) established it, and
// reports what it saw as protocol lines (see testpeer.cc for the list).
#ifndef VSOCKET_TESTS_INTEGRATION_TESTPEER_MODES_H_
#define VSOCKET_TESTS_INTEGRATION_TESTPEER_MODES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace testpeer {

struct ModeConfig {
  std::string name;               // "sink", "source", ...
  std::vector<std::string> args;  // positional arguments after the name
  int64_t reply_bytes = -1;       // sink --reply-bytes
  uint64_t reply_seed = 0;        // sink --reply-seed
  int64_t stall_after = -1;       // source --stall-after
  bool expect_banner = false;     // roundtrip --expect-banner
  int ctl_in = -1;                // poll modes: control pipe from the partner
  int ctl_out = -1;
};

// The fixed banner the "banner" mode sends and "roundtrip --expect-banner"
// checks.
extern const char kBanner[];

// Checks the mode name and its argument count; returns an error text or "".
std::string ValidateMode(const ModeConfig& mode);

// Runs the mode on fd. The mode may close fd itself, in which case it sets
// *fd = -1. Returns false if the mode failed (the caller exits non-zero).
bool RunMode(const ModeConfig& mode, int* fd);

}  // namespace testpeer

#endif  // VSOCKET_TESTS_INTEGRATION_TESTPEER_MODES_H_
