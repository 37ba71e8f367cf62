#include "rdma_backend/rdma_reasons.h"

namespace vsocket::rdma {

const RdmaReasons& RdmaReason() {
  // The meanings are the README's table (vsocket-reasons --markdown).
  static const RdmaReasons reasons = {
      .no_rdma_device = RegisterFallbackReason(
          "no_rdma_device",
          "no local RDMA device, or none reaches the peer (address/route resolution "
          "failed; iWARP)"),
      .rdma_probe_failed = RegisterFallbackReason(
          "rdma_probe_failed",
          "the peer's RDMA CM did not answer within `VSOCKET_RDMA_PROBE_MS`"),
      .rdma_memory_limit = RegisterFallbackReason(
          "rdma_memory_limit",
          "the connection would exceed `VSOCKET_RDMA_MAX_REGISTERED_MB` or the "
          "`VSOCKET_RDMA_POOL_MB` pool, or `RLIMIT_MEMLOCK` refused its registration"),
      .rdma_setup_failed = RegisterFallbackReason(
          "rdma_setup_failed",
          "RDMA setup failed locally, or the channel broke before `accept()` (see the "
          "log)"),
      .peer_rdma_memory_limit = RegisterFallbackReason(
          "peer_rdma_memory_limit",
          "the peer is vsocket but its `rdma_memory_limit` sent the connection to TCP "
          "(it said so in the RDMA CM exchange)"),
      .peer_declined_rdma = RegisterFallbackReason(
          "peer_declined_rdma",
          "the peer is vsocket but declined RDMA for a reason this version does not "
          "know (a newer peer)"),
  };
  return reasons;
}

}  // namespace vsocket::rdma
