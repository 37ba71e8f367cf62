#include "rdma_backend/cm_events.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "base/real_libc.h"
#include "rdma_backend/wire_format.h"
#include "vsocket/wait.h"

namespace vsocket::rdma {

using ::vsocket::MonotonicNs;

bool CmSetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool CmFail(std::string* error, int err, const std::string& what) {
  *error = what + ": " + std::strerror(err);
  errno = err;
  return false;
}

// Waits for the next CM event on `ec` until `deadline_ns`.  On success
// *out holds the event, which the caller must ack.  Returns false with
// errno EAGAIN/ETIMEDOUT on timeout.
bool NextCmEvent(rdma_event_channel* ec, int64_t deadline_ns,
                 rdma_cm_event** out, std::string* error) {
  for (;;) {
    if (rdma_get_cm_event(ec, out) == 0) return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return CmFail(error, errno, "rdma_get_cm_event");
    }
    int timeout_ms = -1;
    if (deadline_ns >= 0) {
      int64_t left = deadline_ns - MonotonicNs();
      if (left <= 0) return CmFail(error, ETIMEDOUT, "waiting for RDMA CM");
      timeout_ms = static_cast<int>(left / 1'000'000) + 1;
    }
    struct pollfd pfd = {ec->fd, POLLIN, 0};
    if (sys::poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR) {
      return CmFail(error, errno, "poll(rdma_cm fd)");
    }
  }
}

// Waits for an event of type `want`; other types are failures mapped to
// errno (a rejection carrying the server's decline: ENOBUFS for its
// memory limit, EREMOTEIO for a cause this version does not know).  On
// success *out must be acked by the caller.
bool ExpectCmEvent(rdma_event_channel* ec, rdma_cm_event_type want,
                   int64_t deadline_ns, rdma_cm_event** out,
                   std::string* error) {
  if (!NextCmEvent(ec, deadline_ns, out, error)) return false;
  rdma_cm_event* ev = *out;
  if (ev->event == want) return true;
  int err = EPROTO;
  switch (ev->event) {
    case RDMA_CM_EVENT_REJECTED: {
      uint16_t port;
      uint8_t cause;
      err = ECONNREFUSED;
      if (DecodeDecline(ev->param.conn.private_data,
                        ev->param.conn.private_data_len, &port, &cause)) {
        err = cause == static_cast<uint8_t>(DeclineCause::kMemoryLimit)
                  ? ENOBUFS
                  : EREMOTEIO;
      }
      break;
    }
    case RDMA_CM_EVENT_CONNECT_ERROR:
      err = ECONNREFUSED;
      break;
    case RDMA_CM_EVENT_UNREACHABLE:
      err = ETIMEDOUT;
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
      err = EHOSTUNREACH;
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      err = ECONNRESET;
      break;
    default:
      break;
  }
  std::string what = std::string("expected ") + rdma_event_str(want) +
                     ", got " + rdma_event_str(ev->event) + " (status " +
                     std::to_string(ev->status) + ")";
  rdma_ack_cm_event(ev);
  *out = nullptr;
  return CmFail(error, err, what);
}

bool CheckCmDevice(rdma_cm_id* id, std::string* error) {
  if (id->verbs == nullptr) {
    return CmFail(error, ENODEV, "RDMA CM id has no device");
  }
  if (id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
    return CmFail(error, EPROTONOSUPPORT,
                std::string("device ") +
                    ibv_get_device_name(id->verbs->device) +
                    " is iWARP, which has no RDMA WRITE WITH IMMEDIATE; "
                    "the vsocket RDMA backend needs InfiniBand or RoCE");
  }
  return true;
}


bool ResolveCmIdOn(rdma_event_channel* ec, const struct sockaddr_in& server,
                   int64_t timeout_ns, rdma_cm_id** id_out,
                   std::string* error) {
  int64_t deadline = MonotonicNs() + timeout_ns;
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP) != 0) {
    return CmFail(error, errno, "rdma_create_id");
  }
  auto cleanup = [&] {
    int e = errno;
    rdma_destroy_id(id);
    errno = e;
    return false;
  };
  rdma_cm_event* ev = nullptr;
  int resolve_ms = static_cast<int>(timeout_ns / 1'000'000);
  struct sockaddr_in dst = server;
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst),
                        resolve_ms) != 0) {
    CmFail(error, errno, "rdma_resolve_addr");
    return cleanup();
  }
  if (!ExpectCmEvent(ec, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, &ev, error)) {
    return cleanup();
  }
  rdma_ack_cm_event(ev);
  if (!CheckCmDevice(id, error)) return cleanup();
  if (rdma_resolve_route(id, resolve_ms) != 0) {
    CmFail(error, errno, "rdma_resolve_route");
    return cleanup();
  }
  if (!ExpectCmEvent(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, &ev, error)) {
    return cleanup();
  }
  rdma_ack_cm_event(ev);
  *id_out = id;
  return true;
}

bool CreateRcQp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, uint32_t send_wr,
                uint32_t recv_wr, uint32_t inline_wanted,
                ibv_qp_init_attr* granted, std::string* error) {
  ibv_qp_init_attr attr = {};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = send_wr;
  attr.cap.max_recv_wr = recv_wr;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = inline_wanted;
  if (rdma_create_qp(id, pd, &attr) != 0) {
    attr.cap.max_inline_data = 0;  // some devices cap inline data lower
    if (rdma_create_qp(id, pd, &attr) != 0) {
      return CmFail(error, errno, "rdma_create_qp");
    }
  }
  *granted = attr;
  return true;
}

bool ListenCmId(const struct sockaddr_in& addr, int backlog,
                rdma_event_channel** ec_out, rdma_cm_id** id_out,
                std::string* error) {
  *ec_out = rdma_create_event_channel();
  if (*ec_out == nullptr) {
    return CmFail(error, errno ? errno : ENODEV, "rdma_create_event_channel");
  }
  CmSetNonBlocking((*ec_out)->fd);
  if (rdma_create_id(*ec_out, id_out, nullptr, RDMA_PS_TCP) != 0) {
    *id_out = nullptr;
    return CmFail(error, errno, "rdma_create_id");
  }
  struct sockaddr_in a = addr;
  if (rdma_bind_addr(*id_out, reinterpret_cast<sockaddr*>(&a)) != 0) {
    return CmFail(error, errno, "rdma_bind_addr");
  }
  if ((*id_out)->verbs != nullptr && !CheckCmDevice(*id_out, error)) {
    return false;
  }
  if (rdma_listen(*id_out, backlog) != 0) {
    return CmFail(error, errno, "rdma_listen");
  }
  return true;
}

}  // namespace vsocket::rdma
