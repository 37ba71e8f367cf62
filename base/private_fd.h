// Where the descriptors vsocket keeps for itself live (liveness TCP
// sockets, sealed segments' and SideState memfds, listener markers, the
// claim's probe socket, the watchers' epoll and eventfd).
//
// They come out of the process's one descriptor table, whose size the
// application controls (RLIMIT_NOFILE), so they must neither take numbers
// the application would get nor be clobbered by a program that dup2()s onto
// numbers it believes free (bash: `exec 5<>/dev/tcp/...`):
//  - When the hard limit is above the soft one (the usual 1024 soft / large
//    hard), they live at or above the soft limit: the soft limit is raised
//    for the one F_DUPFD and put back at once.  The application then keeps
//    every number it may have; it never sees EMFILE because of vsocket.
//    When that range is full, DupPrivate fails (EMFILE); it does not spill
//    into the application's numbers.
//  - Otherwise (soft == hard, as `ulimit -n N` in a shell sets both) they
//    live in the upper half of the application's table (from half the soft
//    limit, at most 1024), and count against it: the shared-memory provider
//    then caps how many it holds (fifo_bridge/descriptor_budget.h).
// Threads: any thread.  Our raises, and our readings of the limit, are
// serialised by one lock, so no vsocket thread reads another's raise (it
// would dup under a limit already put back, or put the raise back for
// good); fork() waits for a raise to end (pthread_atfork), so a child never
// inherits one.  An application thread that allocates a descriptor or
// reads the limit during one (microseconds) may get a number above its
// soft limit or see the raised value, and a concurrent
// setrlimit(RLIMIT_NOFILE) of its own can be undone.
#ifndef VSOCKET_BASE_PRIVATE_FD_H_
#define VSOCKET_BASE_PRIVATE_FD_H_

namespace vsocket::sys {

// A close-on-exec duplicate of `fd` in the private range, or -1 with errno.
int DupPrivate(int fd);
// The same, closing `fd`; returns `fd` unchanged when it already is in the
// private range or no number is free there.
int MovePrivate(int fd);
// Makes `private_fd`, a number DupPrivate or MovePrivate returned, name
// what `fd` names (dup3, close-on-exec), raising the soft limit for the
// call when that number lies above it (dup3 refuses numbers past the soft
// limit with EBADF).  Makes no new descriptor.  0, or -1 with errno.
int ReplacePrivate(int fd, int private_fd);
// Where private descriptors go under the limits of this moment.
struct PrivateFdRange {
  // They count against the application's soft RLIMIT_NOFILE (the hard
  // limit leaves no room above it).
  bool shares_app_table = true;
  long soft_limit = 1024;
  // Otherwise: how many numbers the range above the soft limit holds.
  // DupPrivate never falls back below it, so a caller must stay within.
  long room_above = 0;
};
PrivateFdRange CurrentPrivateFdRange();

// Reads RLIMIT_NOFILE once for the private descriptors one thread makes in
// a burst (a connection's setup makes three or four, and the budget looks
// at the limit first): while it lives, DupPrivate, MovePrivate and
// CurrentPrivateFdRange on this thread use its reading instead of a
// getrlimit each.  A limit another thread changes during the burst is seen
// by the next one (and a raise inside it puts back the soft limit it read:
// the caveat above, over the burst instead of one call).  Nests; lives on
// the stack of the thread that made it.
class NofileLimitSnapshot {
 public:
  NofileLimitSnapshot();
  ~NofileLimitSnapshot();
  NofileLimitSnapshot(const NofileLimitSnapshot&) = delete;
  NofileLimitSnapshot& operator=(const NofileLimitSnapshot&) = delete;

 private:
  NofileLimitSnapshot* outer_;
};

// The application closed a range of descriptors that may hold private
// ones: close_range() or closefrom() (the interposer calls this).  A
// descriptor a component caches for the process's life must then be
// dropped, never closed: its number may name the application's file now.
// Any thread; async-signal-safe.
void NoteRangeClosed();
// How many times NoteRangeClosed was called: a cached descriptor made
// under another count is dropped.
unsigned long RangeClosedCount();

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_PRIVATE_FD_H_
