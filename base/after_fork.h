// Work a forked child must do once fork() has returned in it, not inside a
// fork handler: chiefly starting background threads again.
//
// A pthread_atfork child handler runs inside fork(), where POSIX allows
// only async-signal-safe calls, and before the child handlers registered
// after it: a thread started there would run while those still reset their
// state (the socket table re-makes its mutex in place in one).  Handlers
// therefore only reset memory; the work that needs a running process is
// registered here and runs at the first of:
//   - the interposer's fork() (preload/interpose_fork.cc), right after the
//     real fork() returns in the child;
//   - the explicit API's next call on a connection or poll
//     (vsocket/api.cc), for programs that link vsocket.
#ifndef VSOCKET_BASE_AFTER_FORK_H_
#define VSOCKET_BASE_AFTER_FORK_H_

namespace vsocket::sys {

// Adds `hook` to the work each forked child does (see above), in the order
// of registration.  At most 8 hooks; more are refused with a false return.
// REQUIRES: not called from a fork handler.  Any thread.
bool RunInEachForkedChild(void (*hook)());

// Runs the registered hooks if this process is a forked child that has not
// run them yet; otherwise costs one atomic load.  Any thread; not from a
// signal handler (a hook may start a thread).
void RunForkedChildWork();

// pthread_atfork() for vsocket's own handlers, which are also recorded, so
// that a child made without fork() -- a raw clone without CLONE_VM, which
// runs no fork handler (preload/interpose_clone.cc) -- gets them too: no
// lock another thread held at the clone stays locked in that child.  Same
// arguments and rules as pthread_atfork; at most 32 registrations (more
// still go to pthread_atfork, unrecorded).  Any thread.
int AtFork(void (*prepare)(), void (*parent)(), void (*child)());

// Around such a clone, as fork() runs its handlers: the prepare handlers in
// reverse order of registration before it; then, in registration order,
// the parent handlers in the parent or the child handlers in the child
// (followed by RunForkedChildWork there).  On the cloning thread.
void RunPrepareHandlers();
void RunParentHandlers();
void RunChildHandlers();

}  // namespace vsocket::sys

#endif  // VSOCKET_BASE_AFTER_FORK_H_
