// The user-space half of an epoll set that holds fast-path connections.
//
// For each tracked registration (epoll_tracking.h) of a connected socket
// whose transport knows its readiness in user space (kCapUserSpaceReadiness,
// Transport::PollUserSpace), the set keeps an entry with the registered
// events and data.  A wait (epoll_spin.cc) collects those entries' events
// from the rings themselves, without a system call, and merges in the
// kernel's events for the rest of the set (and for what user space cannot
// tell: end of stream, errors, moves).  While it does, it holds the
// connections (Transport::HoldForUserSpacePoll), so their peers send no
// wake-ups; every kernel sleep gives the holds back first
// (vsocket/kernel_wait.h).
//
// Semantics kept for the user-space part:
//  - level-triggered: an entry is reported while it is ready;
//  - EPOLLET: reported when new bytes arrived since the entry's last report,
//    or when it became writable; the report carries the whole ready mask,
//    as the kernel's does;
//  - EPOLLONESHOT and EPOLLEXCLUSIVE registrations are left to the kernel;
//  - with fewer slots than ready entries, reporting resumes after the last
//    reported entry next time (fair rotation);
//  - an event whose data equals one the kernel reported in the same call is
//    merged into it (union of the bits), so one registration never shows
//    twice.
//  - for a connection user space answers for exactly, its view of EPOLLIN
//    replaces the kernel's: the kernel's EPOLLIN on the descriptor (a
//    wake-up left raised while a poller held the connection, or raised late
//    for bytes this entry already reported under EPOLLET) is dropped unless
//    the user-space look reported EPOLLIN in the same call.  (A kernel
//    descriptor registered with the same epoll data as such a connection
//    would lose its EPOLLIN with it: registrations' data are taken to be
//    distinct, as programs use them to tell their sources apart.)
//
// Threading: one thread uses a set at a time, under mutex() (a wait that
// finds it taken uses the kernel alone); changes are queued by any thread.  Sets are never destroyed; an
// epoll descriptor number reused later finds its entries rebuilt.
#ifndef VSOCKET_PRELOAD_EPOLL_USER_SET_H_
#define VSOCKET_PRELOAD_EPOLL_USER_SET_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "vsocket/user_space_holds.h"

namespace vsocket {
class Transport;
class VirtualSocket;
}  // namespace vsocket

namespace vsocket::preload {

class EpollUserSet {
 public:
  // The set of epoll descriptor `epfd` (0 <= epfd < kMaxTrackedEpollFd),
  // created on first use.
  static EpollUserSet* For(int epfd);

  std::mutex& mutex() { return mutex_; }

  // ---- Registration changes (epoll_tracking.cc, under its lock) ----
  // Queued for the set's next BeginCall, so a program that modifies its
  // registrations on every request (redis-benchmark's EPOLLOUT on, off)
  // costs one queue entry each, not a rebuild.  Only sets already used by
  // a wait hear of them (an unused set builds itself from the tracking).
  // Any thread, without mutex().
  enum class Change { kAdd, kModify, kRemove, kKeep };
  static void NoteChange(int epfd, int fd, Change change,
                         const struct epoll_event* event);
  // The whole set must be built again (its epoll descriptor was closed).
  static void NoteReset(int epfd);
  // fd's registration, `event`, now follows `socket` under `key`: fd was
  // closed while another number keeps the file open
  // (KeepRegistrationsOfClosedNumber).
  static void NoteKept(int epfd, int fd, int key, const struct epoll_event& event,
                       const std::shared_ptr<VirtualSocket>& socket);

  // All below: REQUIRES mutex() held.

  // Rebuilds the entries if registrations changed and takes this call's
  // references to their sockets.  Returns how many entries user space can
  // watch; 0: the caller uses the kernel alone (EndCall still required).
  int BeginCall(int epfd);
  // Drops the references taken by BeginCall.
  void EndCall();
  // Holds every watched connection for user-space polling.
  void HoldAll();

  // Appends the watched entries' ready events to out[0, have), merging
  // into an event of equal data, up to `maxevents`.  Returns the new count.
  // *ask_kernel is set when an entry needs the kernel's view now.
  int Collect(struct epoll_event* out, int have, int maxevents,
              bool* ask_kernel);
  // Removes EPOLLIN from events in out[0, count) that the last Collect's
  // exact looks contradict (see the semantics above), dropping events
  // left empty.  Returns the new count.  For kernel events appended after
  // Collect in the same call.
  int DropKernelInWithoutData(struct epoll_event* out, int count);

  // SO_RCVLOWAT: a connection of the set had a mark at the last BeginCall.
  // Any thread, without mutex().
  bool has_marks() const { return has_marks_.load(std::memory_order_relaxed); }
  // After a kernel sleep on the set (whose events the busy poll did not
  // filter): removes EPOLLIN from events in out[0, count) of connections
  // with a mark whose rings hold less than it, draining the wake-up that
  // raised it (Transport::DropStaleWakeup), and drops events left empty.
  // Returns the new count.  REQUIRES: mutex() held, outside BeginCall/
  // EndCall.
  int DropInBelowMark(struct epoll_event* out, int count);

  // Before this call sleeps in the kernel: counts the sleep on each
  // watched connection that waits for data, so that no other thread's
  // poller holds it meanwhile; `sleep` ends it (the set may be unlocked
  // by then).
  void BeforeKernelSleep(KernelSleepers* sleep);

  // Whether the kernel's part of the set is due for a look: every
  // kKernelEveryCalls calls that returned events, or kKernelEveryNs; or,
  // once the call spins with nothing ready (`waiting`),
  // kKernelWhileWaitingNs (vsocket/poll_user_space.h says why).
  bool KernelDue(int64_t now_ns, bool waiting) const;
  void NoteKernelLook(int64_t now_ns);
  void NoteCallReturned() { ++calls_since_kernel_; }

  static constexpr uint32_t kKernelEveryCalls = 16;
  static constexpr int64_t kKernelEveryNs = 64 * 1000;
  static constexpr int64_t kKernelWhileWaitingNs = 16 * 1000;

 private:
  struct Entry {
    int fd;
    struct epoll_event event;          // as registered
    std::weak_ptr<VirtualSocket> socket;
    uint64_t last_arrivals = ~uint64_t{0};  // EPOLLET: at the last report
    bool last_writable = false;             // EPOLLET: at the last look
  };
  struct Live {
    std::shared_ptr<VirtualSocket> socket;
    Transport* transport = nullptr;  // null: left to the kernel this call
    bool exact = false;        // the last Collect's look was exact
    bool in_reported = false;  // ... and reported EPOLLIN
  };

  struct Pending {
    int fd;
    Change change;
    struct epoll_event event;
    int key = -1;                         // kKeep: the entry's new descriptor
    std::weak_ptr<VirtualSocket> socket;  // kKeep: the entry's socket
  };

  // Builds every entry from the tracked registrations.
  void Rebuild(int epfd);
  // Applies the queued changes (or rebuilds, after a reset).
  void ApplyChanges(int epfd);
  // An entry for `fd` registered with `event`, if user space can watch it.
  // `socket`: the socket (else the one `fd` names now).
  bool MakeEntry(int fd, const struct epoll_event& event, Entry* entry,
                 std::shared_ptr<VirtualSocket> socket = nullptr);
  void RemoveEntry(int fd);

  std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<Live> live_;  // parallel to entries_, between BeginCall/EndCall
  size_t next_ = 0;         // where the next Collect starts
  std::atomic<bool> has_marks_{false};  // see has_marks()
  uint32_t calls_since_kernel_ = 0;
  int64_t last_kernel_ns_ = 0;

  std::mutex changes_mu_;  // guards the two below; taken alone
  std::vector<Pending> changes_;
  bool reset_ = true;  // rebuild at the next call (new, or set closed)
  std::atomic<bool> has_changes_{true};
};

// Fork, in the child: every set starts afresh (unlocked, rebuilt at its
// next wait).  The parent's objects are abandoned, not destroyed: a thread
// of the parent may have been changing one when fork() copied it.
void ReplaceEpollUserSetsInChild();

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_USER_SET_H_
