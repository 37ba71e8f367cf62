// Everything vsocket keeps for one epoll set, in one object per epoll
// descriptor.
//
// An epoll program (redis, nginx, gloo) waits in epoll_wait between
// messages; on a shared-memory connection a kernel wake-up costs more than
// the whole transfer.  So for a set that holds a connection whose
// transport knows its readiness in user space (kCapUserSpaceReadiness,
// Transport::PollUserSpace) the wait (epoll_wait_loop.h) asks this object
// first.  The object owns, for its set:
//
//  - the mark: the set held such a connection (epoll_ctl, or connect()
//    moving an earlier registration); it stays until the epoll descriptor
//    is closed, even if the connection leaves (a few spins too many, never
//    a missed event).  Unmarked sets take the kernel's path.
//  - the entries: for each registration of a watched connection, its
//    events and data.  Collect() reads their events from the rings
//    themselves while the wait holds the connections
//    (Transport::HoldForUserSpacePoll: their peers send no wake-ups; every
//    kernel sleep gives the holds back first, vsocket/kernel_wait.h).
//    Entries are kept by a queue of changes the per-descriptor index
//    (epoll_tracking.h) reports, or rebuilt from its registrations.
//  - the deferred kernel changes: an epoll_ctl ADD, MOD or DEL of a watched
//    connection reaches the kernel only before its next look or sleep on
//    the set, coalesced (see Defer).
//  - the sleepers: threads asleep in the kernel on the set, during which
//    nothing is deferred (they would miss it).
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
// This object calls neither the wait loop nor the per-descriptor index:
// they call it, and hand it what it needs from them.
//
// Threading and locks:
//  - wait_mutex(): one waiting thread uses the entries at a time (a wait
//    that finds it taken uses the kernel alone); only tried, and held
//    while the two below are taken;
//  - the change queue's lock: any thread queues entry changes, also under
//    the index's lock; no other lock is taken under it;
//  - the kernel lock: deferred changes and sleepers; held across the
//    epoll_ctl calls that apply them, and across fork() (prepare takes
//    every set's); no other lock is taken under it.
// Sets are never destroyed (a thread may hold one across a close of its
// descriptor); an epoll descriptor number reused later finds its entries
// rebuilt.  Descriptors at or above kMaxTrackedEpollFd have no set.
#ifndef VSOCKET_PRELOAD_EPOLL_SET_H_
#define VSOCKET_PRELOAD_EPOLL_SET_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "vsocket/user_space_holds.h"

namespace vsocket {
class Transport;
class VirtualSocket;
}  // namespace vsocket

namespace vsocket::preload {

inline constexpr int kMaxTrackedEpollFd = 1 << 16;

class EpollSet {
 public:
  // ---- The sets (any thread) ----

  // The set of `epfd`, or null if it has none yet (or is out of range).
  static EpollSet* Find(int epfd);
  // The set of `epfd`, made on first use; null out of range or without
  // memory.
  static EpollSet* For(int epfd);
  // Installs the fork handlers: the parent applies every deferred change
  // and holds every kernel lock across fork(); the child starts with fresh
  // sets (marks kept, entries rebuilt at their next wait).  The parent's
  // objects are abandoned in the child, not destroyed: a thread of the
  // parent may have been changing one when fork() copied it.  Once, at
  // load, after the index's handlers (so these prepare first).
  static void InstallForkHandlers();

  // The number `fd` is being closed (whatever it was): if it was a set,
  // it loses its mark and its deferred changes, and stops being nested.
  static void Closed(int fd);
  // `fd` was added to an epoll set: if it is a set, its deferred changes
  // are applied and it defers none from now on (another set's kernel wait
  // would read the stale registration).  No allocation: any descriptor.
  static void NoteAddedToEpollSet(int fd);

  // ---- The mark (any thread) ----

  // `fd` (a connected virtual socket) was just added to set `epfd`: marks
  // the set when fd's connection is watchable and spinning is on.
  static void NoteFastPath(int epfd, int fd);
  // Whether waits on this set busy-poll (it is marked, spinning is on).
  bool fast_path() const;

  // ---- Deferred kernel changes (any thread) ----
  //
  // Event-loop programs change their registrations around every write
  // (redis-benchmark: DEL, ADD twice and one MOD per request).  For a
  // watched connection the kernel's registration matters only when the
  // kernel is asked, so its change is remembered, newest state per
  // descriptor, and made before the next kernel look or sleep on the set
  // (KernelEpollEntry) as one ADD, MOD or DEL, or none when the kernel
  // already has it.  The one difference a program could see: an EPOLLET
  // registration removed and added again between two kernel looks does not
  // report again what only the kernel reports (EPOLLRDHUP, EPOLLHUP,
  // EPOLLERR).  Fork and exec apply what is pending first.
  // VSOCKET_EPOLL_DEFER=0 turns this off.

  // The set of `epfd` when an epoll_ctl `op` with `event` on it may be
  // deferred at all: deferring is on, the set busy-polls, and the mask is
  // plain (no EPOLLONESHOT, EPOLLEXCLUSIVE, EPOLLWAKEUP or unknown bits).
  // Null: make the call now.  One load for an unmarked set.
  static EpollSet* MayDefer(int epfd, int op, const struct epoll_event* event);
  // epoll_ctl(op, fd, event) on this set for one of vsocket's descriptors,
  // whose tracked registration here is `registered` (null: none).  True
  // when it was remembered instead of made (the caller then records it in
  // the index and returns 0); false: make it now.  Defers only when the
  // kernel would accept the call, fd is a watchable connection, no thread
  // sleeps in the kernel on the set and the set is not nested.
  bool Defer(int op, int fd, const struct epoll_event* event,
             const struct epoll_event* registered);
  // Applies what is pending for `fd` here (before an epoll_ctl on the set
  // that is made now, so that the kernel answers from the program's
  // registrations).
  void ApplyPending(int fd);
  // In every set: applies what is pending for `fd` while `fd` still names
  // its object (before its close, or before its registrations move), or
  // drops it (its number now names another object).
  static void ApplyPendingOf(int fd);
  static void DropPendingOf(int fd);
  // Applies every pending change of every set (before exec).
  static void ApplyAllPending();

  // ---- Entry changes (from the index, any thread, without wait_mutex) ----
  //
  // Queued for the set's next wait, so a program that modifies its
  // registrations on every request costs one queue entry each, not a
  // rebuild.  Only sets that exist hear of them (a new set builds itself
  // from the index).
  enum class Change { kAdd, kModify, kRemove };
  static void NoteChange(int epfd, int fd, Change change,
                         const struct epoll_event* event);
  // The whole set must be built again (its epoll descriptor was closed).
  static void NoteReset(int epfd);
  // fd's registration, `event`, now follows `socket` under `key`: fd was
  // closed while another number keeps the file open (epoll_tracking.h,
  // KeepRegistrationsOfClosedNumber).
  static void NoteKept(int epfd, int fd, int key, const struct epoll_event& event,
                       const std::shared_ptr<VirtualSocket>& socket);

  // ---- One wait's use of the entries ----

  // One registration of the set, as the index knows it.
  struct Registration {
    int fd;  // a kept registration's key (epoll_tracking.h)
    struct epoll_event event;
    std::weak_ptr<VirtualSocket> socket;  // set for kept registrations only
  };

  std::mutex& wait_mutex() { return wait_mutex_; }

  // All below: REQUIRES wait_mutex() held.

  // Whether the entries must be built from every registration of the set
  // (a new set, or its descriptor was closed): if so the caller passes them
  // to Rebuild before BeginCall.  One load unless a rebuild is due.
  bool TakeRebuild();
  void Rebuild(const std::vector<Registration>& registrations);
  // Applies queued changes and takes this call's references to the
  // entries' sockets.  Returns how many entries user space can watch; 0:
  // the caller uses the kernel alone (EndCall still required).
  int BeginCall();
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
  // Any thread, without wait_mutex().
  bool has_marks() const { return has_marks_.load(std::memory_order_relaxed); }
  // After a kernel sleep on the set (whose events the busy poll did not
  // filter): removes EPOLLIN from events in out[0, count) of connections
  // with a mark whose rings hold less than it, draining the wake-up that
  // raised it (Transport::DropStaleWakeup), and drops events left empty.
  // Returns the new count.  REQUIRES: outside BeginCall/EndCall.
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
  friend class KernelEpollEntry;

  explicit EpollSet(int epfd) : epfd_(epfd) {}

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
  enum class Queued { kAdd, kModify, kRemove, kKeep };
  struct QueuedChange {
    int fd;
    Queued change;
    struct epoll_event event;
    int key = -1;                         // kKeep: the entry's new descriptor
    std::weak_ptr<VirtualSocket> socket;  // kKeep: the entry's socket
  };
  // One descriptor's registration in the kernel's set: what the kernel
  // has, and what the program asked for since.
  struct KernelPending {
    bool kernel_has;
    struct epoll_event kernel;
    bool want_has;
    struct epoll_event want;
  };

  // Queues `change` unless a rebuild is due (which will see it).
  void Queue(const QueuedChange& change);
  // Applies the queued entry changes.
  void ApplyChanges();
  // An entry for `fd` registered with `event`, if user space can watch it.
  // `socket`: the socket (else the one `fd` names now).
  bool MakeEntry(int fd, const struct epoll_event& event, Entry* entry,
                 std::shared_ptr<VirtualSocket> socket = nullptr);
  void RemoveEntry(int fd);

  // Makes the kernel's registrations what the program asked for, with the
  // fewest calls.  REQUIRES: kernel_mu_ held.
  void ApplyKernelLocked();
  void ApplyKernelOne(int fd, KernelPending& p);

  const int epfd_;
  std::atomic<bool> marked_{false};

  // Entries; guarded by wait_mutex_.
  std::mutex wait_mutex_;
  std::vector<Entry> entries_;
  std::vector<Live> live_;  // parallel to entries_, between BeginCall/EndCall
  std::vector<QueuedChange> applying_;  // ApplyChanges' batch
  size_t next_ = 0;         // where the next Collect starts
  std::atomic<bool> has_marks_{false};  // see has_marks()
  uint32_t calls_since_kernel_ = 0;
  int64_t last_kernel_ns_ = 0;

  // The change queue; guarded by changes_mu_.
  std::mutex changes_mu_;
  std::vector<QueuedChange> changes_;
  // Rebuild at the next call (new, or set closed); written under
  // changes_mu_, read without it by TakeRebuild.
  std::atomic<bool> reset_{true};
  std::atomic<bool> has_changes_{true};

  // Deferred kernel changes and sleepers; guarded by kernel_mu_.
  std::mutex kernel_mu_;
  std::unordered_map<int, KernelPending> pending_;  // by descriptor
  int sleepers_ = 0;  // threads inside a sleeping kernel wait on the set
};

// Scope of one kernel wait on `epfd` (epoll_wait/pwait/pwait2, or a look
// without sleeping): applies the set's deferred changes first and, when
// `sleeps`, counts itself a sleeper so nothing is deferred until it ends.
// A sleeper counts itself in any set, marked or not yet: a set marked
// while it sleeps must not defer what it has to see.
class KernelEpollEntry {
 public:
  KernelEpollEntry(int epfd, bool sleeps);
  ~KernelEpollEntry();
  KernelEpollEntry(const KernelEpollEntry&) = delete;
  KernelEpollEntry& operator=(const KernelEpollEntry&) = delete;

 private:
  EpollSet* set_ = nullptr;  // counted as a sleeper in it; null: not counted
};

}  // namespace vsocket::preload

#endif  // VSOCKET_PRELOAD_EPOLL_SET_H_
