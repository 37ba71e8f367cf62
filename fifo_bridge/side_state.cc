#include "fifo_bridge/side_state.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "base/real_libc.h"

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

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

// A sealed memfd of kSideStateBytes in the private range, or -1.
int CreateBackingFile() {
  int fd = ::memfd_create("vsocket-side", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (::ftruncate(fd, kSideStateBytes) != 0 ||
      sys::fcntl(fd, F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0) {
    sys::close(fd);
    return -1;
  }
  return sys::MovePrivate(fd);
}

}  // namespace

SideState* InitSideStateIn(void* slot) {
  std::memset(slot, 0, sizeof(SideState));
  auto* state = new (slot) SideState();
  InitRobustMutex(&state->send_lock);
  InitRobustMutex(&state->recv_lock);
  state->head = 0;
  state->tail = 0;
  state->holders.store(1);
  state->spinners.store(0);
  state->kernel_sleepers.store(0);
  state->local_flags.store(0);
  state->pending_error.store(0);
  return state;
}

SideState* CreateSideState(int* fd) {
  *fd = CreateBackingFile();
  void* page = ::mmap(nullptr, kSideStateBytes, PROT_READ | PROT_WRITE,
                      *fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, *fd, 0);
  if (page == MAP_FAILED) {
    int err = errno;
    if (*fd >= 0) sys::close(*fd);
    *fd = -1;
    errno = err;
    return nullptr;
  }
  return InitSideStateIn(page);
}

SideState* MapInheritedSideState(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return nullptr;
  int seals = sys::fcntl(fd, F_GET_SEALS);
  if (!S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(kSideStateBytes) ||
      seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    errno = EINVAL;
    return nullptr;
  }
  void* page = ::mmap(nullptr, kSideStateBytes, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
  return page == MAP_FAILED ? nullptr : static_cast<SideState*>(page);
}

void DestroySideState(SideState* state, int fd) {
  if (state) ::munmap(state, kSideStateBytes);
  if (fd >= 0) sys::close(fd);
}

SideLock::SideLock(pthread_mutex_t* mutex) : mutex_(mutex) {
  if (pthread_mutex_lock(mutex_) == EOWNERDEAD) pthread_mutex_consistent(mutex_);
}

SideLock::SideLock(pthread_mutex_t* mutex, bool try_only) : mutex_(mutex) {
  int rc = try_only ? pthread_mutex_trylock(mutex_) : pthread_mutex_lock(mutex_);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(mutex_);
  else if (rc != 0) mutex_ = nullptr;
}

SideLock::~SideLock() {
  if (mutex_) pthread_mutex_unlock(mutex_);
}

}  // namespace vsocket::fifo
