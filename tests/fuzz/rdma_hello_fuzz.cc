// The RDMA connection hello (rdma_backend/wire_format.h), as it arrives in
// RDMA CM private data from any host that can reach the listener: no RDMA
// hardware needed, the decoder is the whole parser.
//
// Checks: a short or null buffer is refused; an accepted hello names a
// power-of-two capacity within kMaxRingCapacity and a non-null ring address
// whose end does not wrap; Encode(Decode(x)) decodes to the same fields and
// reproduces x's checked bytes.
#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz_input.h"
#include "rdma_backend/wire_format.h"

namespace rdma = vsocket::rdma;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The private data as the CM hands it: exactly `size` bytes.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size + 1]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  rdma::Hello hello;
  bool ok = rdma::DecodeHello(size > 0 ? copy.get() : nullptr, size, &hello);
  if (size < rdma::kHelloBytes) FUZZ_CHECK(!ok);
  if (!ok) return 0;
  FUZZ_CHECK(vsocket::fifo::IsValidCapacity(hello.capacity));
  FUZZ_CHECK(hello.capacity <= rdma::kMaxRingCapacity);
  FUZZ_CHECK(hello.ring_data_addr != 0);
  FUZZ_CHECK(hello.ring_data_addr + hello.capacity > hello.ring_data_addr);

  uint8_t wire[rdma::kHelloBytes];
  rdma::EncodeHello(hello, wire);
  rdma::Hello again;
  FUZZ_CHECK(rdma::DecodeHello(wire, sizeof(wire), &again));
  FUZZ_CHECK(again.ring_data_addr == hello.ring_data_addr);
  FUZZ_CHECK(again.rkey == hello.rkey);
  FUZZ_CHECK(again.capacity == hello.capacity);
  FUZZ_CHECK(again.tcp_port == hello.tcp_port);
  // Every byte but the reserved word (12..15) is what the peer sent.
  FUZZ_CHECK(std::memcmp(wire, data, 12) == 0);
  FUZZ_CHECK(std::memcmp(wire + 16, data + 16, 16) == 0);
  return 0;
}
