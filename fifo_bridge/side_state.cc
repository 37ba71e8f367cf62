#include "fifo_bridge/side_state.h"

#include <errno.h>
#include <sys/mman.h>

#include <new>

namespace vsocket::fifo {
namespace {

void InitRobustMutex(pthread_mutex_t* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

}  // namespace

SideState* CreateSideState() {
  void* page = ::mmap(nullptr, sizeof(SideState), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return nullptr;
  auto* state = new (page) SideState();
  InitRobustMutex(&state->send_lock);
  InitRobustMutex(&state->recv_lock);
  state->head = 0;
  state->tail = 0;
  state->holders.store(1);
  state->spinners.store(0);
  state->local_flags.store(0);
  state->pending_error.store(0);
  return state;
}

void DestroySideState(SideState* state) {
  if (state) ::munmap(state, sizeof(SideState));
}

SideLock::SideLock(pthread_mutex_t* mutex) : mutex_(mutex) {
  if (pthread_mutex_lock(mutex_) == EOWNERDEAD) pthread_mutex_consistent(mutex_);
}

SideLock::~SideLock() { pthread_mutex_unlock(mutex_); }

}  // namespace vsocket::fifo
