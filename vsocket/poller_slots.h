// How many threads of this process may busy-poll in the user-space waits
// (the interposer's epoll/poll/select, vsocket_poll) at once: VSOCKET_SPIN_THREADS, by default half the online CPUs, at least
// one.  A program with more event
// loop threads than that (memcached's four workers on two cores) would
// otherwise spin them all against each other and against its peers; the
// others look once and sleep in the kernel, where their connections stay
// armed and wake them.
//
// Threading: any thread; a slot is taken and given back by one call.
#ifndef VSOCKET_VSOCKET_POLLER_SLOTS_H_
#define VSOCKET_VSOCKET_POLLER_SLOTS_H_

namespace vsocket {

class PollerSlot {
 public:
  PollerSlot();
  ~PollerSlot();
  PollerSlot(const PollerSlot&) = delete;
  PollerSlot& operator=(const PollerSlot&) = delete;

  // Whether this call may spin.
  bool taken() const { return taken_; }

 private:
  bool taken_;
};

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_POLLER_SLOTS_H_
