// The process's links (rdma_backend/README.md "Links", link_registry row).
//
// Client: one link per server address (ip:port of its RDMA listener; the
// route picks the device, so the address names the device too) for new
// connections.  One setup at a time per address: a connection that finds
// a setup under way waits for it (bounded by its deadline) and shares its
// outcome.
// Server: the links each RDMA listener accepted; when the listener stops
// they are retired: a link with no connection is closed at once, the
// others when their last connection leaves, and meanwhile their OPENs are
// declined (listener gone; LinkWatch sees no handler).
//
// Threading: thread-safe; the registry's mutex is the last in the lock
// order (Core::mu -> RdmaLink::mu_ -> registry) and no setup runs under it.
// Fork: the child's registry starts empty (pthread_atfork); the parent's
// links are never touched there.
#ifndef VSOCKET_RDMA_BACKEND_LINK_REGISTRY_H_
#define VSOCKET_RDMA_BACKEND_LINK_REGISTRY_H_

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>

#include "rdma_backend/link_watch.h"

namespace vsocket::rdma {

// Client: the live link to `server`, made (RdmaLink::Connect with
// VSOCKET_RDMA_QPS_PER_LINK QPs, then watched) if there is none, all by
// `deadline_ns` (CLOCK_MONOTONIC).  nullptr with errno (ECONNREFUSED: the
// server rejected the link hello, e.g. a version-1 server; ETIMEDOUT; as
// RdmaLink::Connect) and *error.
std::shared_ptr<LinkWatch> ClientLink(const struct sockaddr_in& server,
                                      int64_t deadline_ns, std::string* error);
// Client: new connections to `server` must not use `watch` (its listener
// is gone): the next ClientLink makes a new link.
void DropClientLink(const struct sockaddr_in& server, const LinkWatch* watch);

// Server: `watch` was accepted by `listener` (any stable key).
void AddServerLink(const void* listener, std::shared_ptr<LinkWatch> watch);
// Server: `listener` stopped: retires its links (see above).
void RetireServerLinks(const void* listener);

}  // namespace vsocket::rdma

#endif  // VSOCKET_RDMA_BACKEND_LINK_REGISTRY_H_
