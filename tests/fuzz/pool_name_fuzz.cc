// A pool offer's name as a hostile process of the user could write it: the
// symlink text a server reads back (fifo_bridge/shm_pool.h), parsed
// strictly (ParsePoolOfferTarget, ParsePoolName) and then claimed
// (ShmSegment::OpenOffer on a real symlink beside a real pool).
//
// Checks: a parsed text is exactly what FormatPoolOfferTarget makes of its
// fields (one spelling per offer), its pool name parses alone, its slice
// is below kPoolSlices; OpenOffer succeeds only for the one slice that was
// offered, with its generation, in the pool that exists.
//
// Input: the symlink's text; each '@' stands for the real pool's name (its
// nonce is random per run).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "fifo_bridge/shm_pool.h"
#include "fifo_bridge/shm_segment.h"
#include "fuzz_input.h"

namespace {

namespace fifo = vsocket::fifo;

struct RealOffer {
  std::unique_ptr<fifo::ShmSegment> segment;
  fifo::PoolOfferTarget target;
  std::string key;
};

RealOffer& TheOffer() {
  static RealOffer* offer = [] {
    auto* o = new RealOffer();
    o->key = "t-fuzz-pool-real-" + std::to_string(::getpid());
    FUZZ_CHECK(fifo::ShmSegment::CreateOffer(o->key, 65536, &o->segment, ::geteuid(),
                                             /*pooled=*/true) == 0);
    char buf[256];
    ssize_t n = ::readlink((fifo::ShmDirectory(::geteuid()) + "/" + o->key).c_str(), buf,
                           sizeof(buf));
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(fifo::ParsePoolOfferTarget(std::string(buf, static_cast<size_t>(n)),
                                          &o->target));
    o->segment->Unlink();
    return o;
  }();
  return *offer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RealOffer& real = TheOffer();
  std::string text;
  for (size_t i = 0; i < size && text.size() < 1024; ++i) {
    if (data[i] == '@') text += real.target.pool;
    else text += static_cast<char>(data[i]);
  }
  fifo::PoolOfferTarget t;
  bool parsed = fifo::ParsePoolOfferTarget(text, &t);
  if (parsed) {
    FUZZ_CHECK(fifo::FormatPoolOfferTarget(t.pool, t.slice, t.generation) == text);
    FUZZ_CHECK(t.slice < fifo::kPoolSlices);
    uint32_t pid = 0;
    uint64_t cap = 0;
    FUZZ_CHECK(fifo::ParsePoolName(t.pool, &pid, &cap));
    FUZZ_CHECK(pid == t.owner_pid && cap == t.capacity);
    FUZZ_CHECK(t.pool.find('/') == std::string::npos);
  }
  uint32_t pid = 0;
  uint64_t cap = 0;
  if (fifo::ParsePoolName(text, &pid, &cap)) {
    FUZZ_CHECK(text.compare(0, 5, "pool-") == 0 && text.find('/') == std::string::npos);
  }
  // The claim: a symlink with this text, read back by OpenOffer.
  if (text.empty() || text.size() >= 256 || std::memchr(text.data(), 0, text.size()))
    return 0;
  static const std::string key = "t-fuzz-pool-name-" + std::to_string(::getpid());
  std::string path = fifo::ShmDirectory(::geteuid()) + "/" + key;
  ::unlink(path.c_str());
  if (::symlink(text.c_str(), path.c_str()) != 0) return 0;
  std::unique_ptr<fifo::ShmSegment> server;
  int err = fifo::ShmSegment::OpenOffer(key, &server);
  ::unlink(path.c_str());
  if (err == 0) {
    FUZZ_CHECK(parsed && t.pool == real.target.pool && t.slice == real.target.slice &&
               t.generation == real.target.generation);
    FUZZ_CHECK(server->pooled() && server->capacity() == real.target.capacity);
  }
  return 0;
}
