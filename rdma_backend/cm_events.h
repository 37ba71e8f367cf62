// RDMA CM helpers shared by the per-connection setup (rdma_cm_connection)
// and links (rdma_link): bounded waits for CM events, the device check
// (iWARP refused), and client-side address/route resolution.
//
// Threading: stateless; each call uses only the objects it is given.
// Blocking: every wait ends at its deadline (absolute CLOCK_MONOTONIC ns,
// -1 = none).
#ifndef VSOCKET_RDMA_BACKEND_CM_EVENTS_H_
#define VSOCKET_RDMA_BACKEND_CM_EVENTS_H_

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>

namespace vsocket::rdma {

// O_NONBLOCK on `fd`; false on failure.
bool CmSetNonBlocking(int fd);

// Sets errno = err and *error = what + ": " + strerror(err); returns false.
bool CmFail(std::string* error, int err, const std::string& what);

// Waits for the next CM event on `ec` (non-blocking fd) until
// `deadline_ns`.  On success *out holds the event, which the caller must
// ack.  False with errno ETIMEDOUT on timeout.
bool NextCmEvent(rdma_event_channel* ec, int64_t deadline_ns,
                 rdma_cm_event** out, std::string* error);

// Waits for an event of type `want`; other types are failures mapped to
// errno (a rejection carrying the server's decline: ENOBUFS for its memory
// limit, EREMOTEIO for a cause this version does not know; a plain
// rejection ECONNREFUSED).  On success *out must be acked by the caller.
bool ExpectCmEvent(rdma_event_channel* ec, rdma_cm_event_type want,
                   int64_t deadline_ns, rdma_cm_event** out,
                   std::string* error);

// False (EPROTONOSUPPORT, with why) for an iWARP device, which has no RDMA
// WRITE WITH IMMEDIATE; ENODEV if the id has no device yet.
bool CheckCmDevice(rdma_cm_id* id, std::string* error);

// Creates an RDMA_PS_TCP id on `ec` and resolves the address and route to
// `server`, both bounded by `timeout_ns`.  REQUIRES: `ec` is non-blocking
// and nothing else waits on it meanwhile.  False with errno and *error,
// the id destroyed.
bool ResolveCmIdOn(rdma_event_channel* ec, const struct sockaddr_in& server,
                   int64_t timeout_ns, rdma_cm_id** id_out,
                   std::string* error);

// Creates `id`'s RC QP on `pd` with `cq` for both queues, one SGE each,
// sq_sig_all 0, asking `inline_wanted` bytes of inline data (retried
// without inline where the device caps it lower).  *granted: what the
// device gave (cap.max_inline_data, cap.max_send_wr).  False with errno
// and *error.
bool CreateRcQp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, uint32_t send_wr,
                uint32_t recv_wr, uint32_t inline_wanted,
                ibv_qp_init_attr* granted, std::string* error);

// A listening RDMA_PS_TCP id bound to `addr` on a new non-blocking event
// channel (*ec_out, *id_out), its device checked if it has one already.
// False with errno and *error; whatever was made is left in *ec_out and
// *id_out (null or valid) for the caller's destructor.
bool ListenCmId(const struct sockaddr_in& addr, int backlog,
                rdma_event_channel** ec_out, rdma_cm_id** id_out,
                std::string* error);

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_CM_EVENTS_H_
