// Hazard slots: a thread may use an object it found in a lock-free table
// without touching a reference count, while another thread removes the
// object from the table.  The socket table's fast lookup uses them, so a
// send() or recv() on a virtual socket costs two uncontended atomic
// exchanges on the calling thread's own cache line instead of a shared
// rwlock and a reference count.
//
// Protocol (all operations sequentially consistent):
//   reader:  slot = Protect(p); re-read the table; if it no longer holds p,
//            Release(slot) and take the slow path; else use p, then
//            Release(slot).
//   remover: unpublish p from the table; if IsProtected(p), keep p alive
//            (the caller's retired list) and NoteRetired(+1); when a later
//            Release() returns true, or the remover's own re-check finds p
//            unprotected, the retired list is collected (NoteRetired(-n)).
// Either the reader's re-read sees p gone, or the remover sees the slot;
// either a releasing reader sees the retired count, or the remover's
// re-check sees the slot cleared.  So nothing is freed while protected and
// nothing retired is forgotten.
//
// Threads: any.  Each thread owns up to kSlotsPerThread slots at a time
// (nested calls, signal handlers); Protect claims a free one with a CAS,
// so a signal handler on the same thread cannot take a slot in use.  The
// per-thread records come from a fixed static pool (no allocation, so a
// first call from a signal handler is safe); past the pool, or after the
// thread's record was given back at thread exit, Protect returns -1 and
// the caller uses its slow path.
#ifndef VSOCKET_VSOCKET_HAZARD_SLOTS_H_
#define VSOCKET_VSOCKET_HAZARD_SLOTS_H_

namespace vsocket::hazard {

constexpr int kSlotsPerThread = 4;

// Publishes `p` in a free slot of the calling thread.  Returns the slot's
// handle, or -1 when none is free (the caller must not rely on p then).
// REQUIRES: p != nullptr.
int Protect(const void* p);

// Clears the slot Protect returned.  True when retired objects are waiting:
// the caller should then collect its retired list.
bool Release(int slot);

// True when some thread's slot holds `p`.  Cost: one load per slot of every
// thread record ever used.
bool IsProtected(const void* p);

// The owner of a retired list reports how many objects it keeps alive.
void NoteRetired(int delta);

// In a fork child: the other threads are gone, so are their protections.
void ForgetOtherThreads();

}  // namespace vsocket::hazard

#endif  // VSOCKET_VSOCKET_HAZARD_SLOTS_H_
