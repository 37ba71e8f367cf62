// Client side of choosing RDMA for a new connection (docs/PROTOCOL.md
// section 5): is there a device, did this destination say no recently, and
// the bounded RDMA CM probe that establishes the channel before the kernel
// TCP connect.  The server side is rdma_acceptor.h.
//
// Threading: all functions are thread-safe.
// Blocking: ProbeRdmaPeer() waits at most VSOCKET_RDMA_PROBE_MS.
#ifndef VSOCKET_RDMA_BACKEND_RDMA_NEGOTIATION_H_
#define VSOCKET_RDMA_BACKEND_RDMA_NEGOTIATION_H_

#include <netinet/in.h>

#include <cstdint>
#include <memory>

#include "rdma_backend/rdma_channel.h"
#include "vsocket/fallback_reason.h"

namespace vsocket::rdma {

// True if this process sees at least one RDMA device (checked once).
bool HaveRdmaDevice();

// Creates the memory pool of every RDMA device now (pinning and registering
// the arenas takes long on a slow machine), so that the first connection's
// handshake does not pay for it.  Idempotent; thread-safe.
void WarmUpRdma();

// Registered bytes one connection with the configured ring size will hold
// (the receive ring's data area + the mirror of a peer ring of the same
// size).
uint64_t ExpectedRegisteredBytes();
// True if a new connection would exceed VSOCKET_RDMA_MAX_REGISTERED_MB.
bool OverMemoryLimit();

// The receive ring of a new connection over a link: VSOCKET_RDMA_RING_SIZE
// while the process's registered bytes are under half of
// VSOCKET_RDMA_MAX_REGISTERED_MB, then smaller as they grow: 64 KiB from
// half, 16 KiB from 9/16, 4 KiB from 11/16 (so that the default limit
// holds over 10,000 connections).
uint32_t LinkRingBytes();

// The channel options a vsocket RDMA connection uses (from the config).
ChannelOptions ConnectionOptions();

// Connects an RDMA channel to `dst` announcing `local_tcp_port`, bounded by
// VSOCKET_RDMA_PROBE_MS.  kNone and *channel on success; otherwise the
// reason (no_rdma_device, rdma_probe_failed, peer_not_vsocket,
// rdma_memory_limit, rdma_setup_failed).  Negative answers are remembered
// per destination address and port for VSOCKET_RDMA_NEGATIVE_TTL_MS and
// returned without probing again.  Memory limits are not remembered: ours
// (rdma_memory_limit; the server is told, RdmaSendDecline, bounded by
// VSOCKET_RDMA_PROBE_MS, so that its accept() says peer_rdma_memory_limit,
// not peer_not_vsocket) or the server's (peer_rdma_memory_limit, from its
// rejection).
FallbackReason ProbeRdmaPeer(const struct sockaddr_in& dst,
                             uint16_t local_tcp_port,
                             std::unique_ptr<RdmaChannel>* channel);

// Forgets every remembered negative answer (tests).
void ClearNegativeCache();

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_RDMA_NEGOTIATION_H_
