// An offer's segment file as a hostile client could leave it: the server's
// validation (ShmSegment::OpenOffer, IsValidSegmentHeader), the claim CAS
// of fifo_bridge/shm_provider.cc, the ring halves on the mapped rings with
// the control blocks the file holds, the exec adoption of the same file
// (ShmSegment::AdoptInherited), the client's reclaiming of a stale name
// (ShmSegment::CreateOffer over it) and the rendezvous names
// (EndpointFromSockaddr, ConnectionKey) built from an arbitrary address.
//
// Input: a size selector byte, the 40-byte header, two 64-byte ring control
// blocks, a sockaddr length byte and its bytes.  The file lives under
// /dev/shm/vsocket-<uid>/ as a real offer does (created private first).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "fifo_bridge/rendezvous.h"
#include "fifo_bridge/ring_layout.h"
#include "fifo_bridge/shm_segment.h"
#include "fifo_bridge/spsc_ring.h"
#include "fuzz_input.h"

namespace {

namespace fifo = vsocket::fifo;
using vsocket_fuzz::FuzzInput;

// Largest file the target makes (a valid header may name a 1 GiB ring).
constexpr uint64_t kMaxFileBytes = 64ull << 20;

std::string Key() { return "fuzz-" + std::to_string(::getpid()); }

std::string Path() {
  return "/dev/shm/vsocket-" + std::to_string(::geteuid()) + "/" + Key();
}

// What CreateOffer would do first: the private per-user directory.
bool EnsureDirectory() {
  static bool ok = [] {
    std::string dir = "/dev/shm/vsocket-" + std::to_string(::geteuid());
    ::mkdir(dir.c_str(), 0700);
    struct stat st;
    return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
           (st.st_mode & 077) == 0;
  }();
  return ok;
}

// Exercises one mapped ring with the control block the file gave it.
void UseRing(fifo::RingControl* control, uint8_t* data, uint64_t capacity) {
  uint64_t own_tail = control->tail.load();  // as if we had consumed so far
  uint64_t own_head = control->head.load();
  fifo::RingConsumer consumer(control, data, capacity, &own_tail);
  fifo::RingProducer producer(control, data, capacity, &own_head);
  uint8_t buf[512];
  struct iovec iov = {buf, sizeof(buf)};
  int64_t got = consumer.Read(&iov, 1, 0, /*peek=*/true);
  FUZZ_CHECK(got == fifo::kCorrupt || (got >= 0 && got <= int64_t(sizeof(buf))));
  const uint8_t* view = nullptr;
  got = consumer.Contiguous(&view);
  if (got > 0) {
    FUZZ_CHECK(view >= data && view + got <= data + capacity);
    FUZZ_CHECK(static_cast<uint64_t>(got) <= capacity);
  }
  std::memset(buf, 0x5a, sizeof(buf));
  got = producer.Write(&iov, 1, 0);
  FUZZ_CHECK(got == fifo::kCorrupt || (got >= 0 && got <= int64_t(sizeof(buf))));
}

void CheckEndpoint(FuzzInput* in) {
  size_t len = in->Take<uint8_t>() % (sizeof(struct sockaddr_storage) + 1);
  std::string bytes = in->TakeBytes(len);
  // Exactly `len` bytes, so that a read past the stated length is seen.
  std::unique_ptr<uint8_t[]> addr(new uint8_t[bytes.size() + 1]);
  std::memcpy(addr.get(), bytes.data(), bytes.size());
  fifo::Endpoint endpoint;
  if (!fifo::EndpointFromSockaddr(reinterpret_cast<struct sockaddr*>(addr.get()),
                                  static_cast<socklen_t>(bytes.size()), &endpoint)) {
    return;
  }
  std::string key = fifo::ConnectionKey(endpoint, in->Take<uint16_t>());
  // A key names a file and an abstract socket: no directory separator.
  FUZZ_CHECK(key.find('/') == std::string::npos);
  FUZZ_CHECK(key.find(':') == std::string::npos);
  FUZZ_CHECK(key.size() < 100);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FUZZ_CHECK(EnsureDirectory());
  FuzzInput in(data, size);
  uint8_t size_mode = in.Take<uint8_t>();
  std::string header_bytes = in.TakeBytes(40);
  header_bytes.resize(40, '\0');
  std::string controls[2] = {in.TakeBytes(64), in.TakeBytes(64)};

  fifo::SegmentHeader header;
  std::memcpy(static_cast<void*>(&header), header_bytes.data(),
              sizeof(header) < 40 ? sizeof(header) : 40);
  // Mostly the size the header implies (so validation can pass), otherwise
  // a size near it or an arbitrary one.
  uint64_t file_bytes;
  uint64_t implied = fifo::IsValidCapacity(header.ring_capacity)
                         ? fifo::SegmentBytes(header.ring_capacity)
                         : 0;
  switch (size_mode % 4) {
    case 0: case 1: file_bytes = implied; break;
    case 2: file_bytes = implied + (size_mode >> 2) - 32; break;
    default: file_bytes = static_cast<uint64_t>(size_mode >> 2) * 4096; break;
  }
  if (file_bytes > kMaxFileBytes) file_bytes = uint64_t{size_mode} * 512;

  std::string path = Path();
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(::ftruncate(fd, static_cast<off_t>(file_bytes)) == 0);
  FUZZ_CHECK(::pwrite(fd, header_bytes.data(), 40, 0) >= 0);
  if (implied != 0) {
    size_t stride = (fifo::SegmentBytes(header.ring_capacity) - fifo::kSegmentHeaderBytes) / 2;
    for (int d = 0; d < 2; ++d) {
      off_t at = static_cast<off_t>(fifo::kSegmentHeaderBytes + d * stride);
      if (static_cast<uint64_t>(at) + controls[d].size() > file_bytes) continue;
      FUZZ_CHECK(::pwrite(fd, controls[d].data(), controls[d].size(), at) >= 0);
    }
  }

  bool expect_valid = fifo::IsValidSegmentHeader(
      header, static_cast<uint64_t>(lseek(fd, 0, SEEK_END)));
  std::unique_ptr<fifo::ShmSegment> segment;
  int err = fifo::ShmSegment::OpenOffer(Key(), &segment);
  // Another vsocket process of this user may have swept the file meanwhile
  // (its header names a client that is gone: SweepDeadOffers).
  if (err == -ENOENT && ::access(path.c_str(), F_OK) != 0) {
    ::close(fd);
    return 0;
  }
  FUZZ_CHECK((err == 0) == expect_valid);
  if (err == 0) {
    FUZZ_CHECK(segment->capacity() == header.ring_capacity);
    FUZZ_CHECK(fifo::IsValidCapacity(segment->capacity()));
    // The claim, as ShmListener::ClaimOffer makes it.
    uint32_t word = segment->header()->claim.load();
    uint32_t expected = fifo::kOffered;
    bool claimed = segment->header()->claim.compare_exchange_strong(expected, fifo::kClaimed);
    FUZZ_CHECK(claimed == (word == fifo::kOffered));
    for (fifo::Direction d : {fifo::Direction::kClientToServer,
                              fifo::Direction::kServerToClient}) {
      UseRing(segment->control(d), segment->data(d), segment->capacity());
    }
    // The same file handed across exec: accepted only once claimed.
    std::unique_ptr<fifo::ShmSegment> adopted;
    int adopt = fifo::ShmSegment::AdoptInherited(::dup(segment->DescriptorForExec()),
                                                 Key(), &adopted);
    FUZZ_CHECK((adopt == 0) == (segment->header()->claim.load() == fifo::kClaimed));
    segment->Unlink();
  } else {
    // A client making its offer under that name: it reclaims the name only
    // when the pid the header names is gone (or impossible).
    std::unique_ptr<fifo::ShmSegment> fresh;
    int made = fifo::ShmSegment::CreateOffer(Key(), 4096, &fresh);
    FUZZ_CHECK(made == 0 || made == -EADDRINUSE);
    if (header.client_pid == static_cast<uint32_t>(::getpid()) && file_bytes >= 40 &&
        !(header.released.load() & fifo::kClientReleased))
      FUZZ_CHECK(made == -EADDRINUSE);
    if (fresh) fresh->Unlink();
  }
  ::close(fd);
  ::unlink(path.c_str());
  CheckEndpoint(&in);
  return 0;
}
