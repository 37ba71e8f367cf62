// What a new program image reads before it trusts anything it inherited
// across exec: the VSOCKET_INHERITED text (preload/inherited_variable.h,
// then ShmTransport::ParseExecFields for a shared-memory entry) and the
// SideState memfd (MapInheritedSideState), either of which any program
// could forge.
//
// Checks: every parsed descriptor number is in [0, 2^20) ("-1" only for a
// listener's marker; a shared-memory entry's side state may be "-", kept
// in the segment), a number list holds distinct numbers, the entries
// and fields rebuild the text they came from; MapInheritedSideState maps
// only a regular file of exactly one page sealed against shrinking and
// growing (so the whole page can be read), whatever else the file is.
//
// Input: one byte of memfd shape (size, seals), then the variable's text.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fifo_bridge/shm_transport.h"
#include "fifo_bridge/side_state.h"
#include "fuzz_input.h"
#include "preload/inherited_variable.h"

namespace {

namespace fifo = vsocket::fifo;
namespace preload = vsocket::preload;
using vsocket_fuzz::FuzzInput;

constexpr int kMaxFd = 1 << 20;

std::string Join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

void CheckText(const std::string& text) {
  std::vector<preload::InheritedEntry> entries;
  if (!preload::ParseInheritedVariable(text, &entries)) {
    FUZZ_CHECK(text.substr(0, text.find(';')) != "1");
    return;
  }
  std::vector<std::string> rebuilt = {"1"};
  for (const preload::InheritedEntry& e : entries) {
    std::vector<std::string> f = {e.kind};
    if (e.field_count >= 2) {
      f.insert(f.end(), e.fields.begin(), e.fields.end());
      f.push_back(e.numbers);
      FUZZ_CHECK(e.fields.size() + 2 == e.field_count);
    } else {
      FUZZ_CHECK(e.field_count == 1 && e.fields.empty() && e.numbers.empty());
    }
    rebuilt.push_back(Join(f, ','));

    std::vector<int> fds;
    if (preload::ParseInheritedFdList(e.numbers, &fds)) {
      FUZZ_CHECK(!fds.empty());
      for (size_t i = 0; i < fds.size(); ++i) {
        FUZZ_CHECK(fds[i] >= 0 && fds[i] < kMaxFd);
        for (size_t j = 0; j < i; ++j) FUZZ_CHECK(fds[i] != fds[j]);
      }
    }
    if (e.kind == "listen" && e.field_count == 3) {
      int marker = -2;
      if (preload::ParseInheritedFd(e.fields[0], true, &marker))
        FUZZ_CHECK(marker >= -1 && marker < kMaxFd);
    }
    fifo::ShmTransport::Role role;
    fifo::ShmTransport::InheritedFds inherited;
    if (fifo::ShmTransport::ParseExecFields(e.fields, &role, &inherited)) {
      FUZZ_CHECK(e.fields.size() == 4);
      for (int fd : {inherited.segment, inherited.tcp})
        FUZZ_CHECK(fd >= 0 && fd < kMaxFd);
      // "-": the side state is in the segment's slot; otherwise a number.
      if (e.fields[2] == "-") {
        FUZZ_CHECK(inherited.side == -1);
      } else {
        FUZZ_CHECK(inherited.side >= 0 && inherited.side < kMaxFd);
      }
    }
  }
  FUZZ_CHECK(Join(rebuilt, ';') == text);
}

// A memfd of an input-chosen size, seals and contents posing as the side
// state an old image left.
void CheckSideState(uint8_t shape, const std::string& contents) {
  static const off_t kSizes[] = {0, 1, 4095, 4096, 4097, 8192};
  bool sealable = shape & 0x40;
  int fd = ::memfd_create("fuzz-side", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0));
  FUZZ_CHECK(fd >= 0);
  off_t bytes = kSizes[shape % 6];
  FUZZ_CHECK(::ftruncate(fd, bytes) == 0);
  if (!contents.empty() && bytes > 0) {
    size_t n = contents.size() < size_t(bytes) ? contents.size() : size_t(bytes);
    FUZZ_CHECK(::pwrite(fd, contents.data(), n, 0) == ssize_t(n));
  }
  int seals = 0;
  if (shape & 0x08) seals |= F_SEAL_SHRINK;
  if (shape & 0x10) seals |= F_SEAL_GROW;
  if (shape & 0x20) seals |= F_SEAL_WRITE;
  bool sealed = sealable && seals != 0 && ::fcntl(fd, F_ADD_SEALS, seals) == 0;
  bool size_sealed = sealed && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
                                   (F_SEAL_SHRINK | F_SEAL_GROW);
  fifo::SideState* state = fifo::MapInheritedSideState(fd);
  if (!(size_sealed && bytes == off_t(fifo::kSideStateBytes))) {
    FUZZ_CHECK(state == nullptr);
  } else if (!(seals & F_SEAL_WRITE)) {
    FUZZ_CHECK(state != nullptr);  // a shared writable mapping of a sealed-write file fails
  }
  if (state != nullptr) {
    // Every byte of the page is there to be read.
    volatile uint8_t sum = 0;
    const auto* page = reinterpret_cast<const uint8_t*>(state);
    for (size_t i = 0; i < fifo::kSideStateBytes; ++i) sum = sum + page[i];
    (void)sum;
    fifo::DestroySideState(state, -1);
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t shape = in.Take<uint8_t>();
  std::string text = in.TakeRest();
  CheckText(text);
  CheckSideState(shape, text);
  return 0;
}
