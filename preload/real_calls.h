// The real libc functions behind the interposed names that vsocket::sys::
// (base/real_libc.h) does not cover.  Each resolves the next definition
// after this library with dlsym(RTLD_NEXT) on first use and caches it.
// Thread-safe; async-signal-safe once resolved.  A symbol libc does not have
// (an older glibc) makes the call fail with ENOSYS.
#ifndef VSOCKET_PRELOAD_REAL_CALLS_H_
#define VSOCKET_PRELOAD_REAL_CALLS_H_

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/select.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace vsocket::preload::real {

int dup(int fd);
int dup2(int oldfd, int newfd);
int epoll_ctl(int epfd, int op, int fd, struct epoll_event* event);
int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
               int timeout);
int epoll_pwait(int epfd, struct epoll_event* events, int maxevents,
                int timeout, const sigset_t* sigmask);
int epoll_pwait2(int epfd, struct epoll_event* events, int maxevents,
                 const struct timespec* timeout, const sigset_t* sigmask);
int ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
          const sigset_t* sigmask);
int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
           struct timeval* timeout);
int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
            const struct timespec* timeout, const sigset_t* sigmask);
ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count);
ssize_t splice(int fd_in, off_t* off_in, int fd_out, off_t* off_out,
               size_t len, unsigned int flags);
int sendmmsg(int fd, struct mmsghdr* msgs, unsigned int vlen, int flags);
ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags);
ssize_t pwritev2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags);
ssize_t preadv64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset,
                   int flags);
ssize_t pwritev64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset,
                    int flags);
int close_range(unsigned int first, unsigned int last, int flags);
void closefrom(int lowfd);
FILE* fdopen(int fd, const char* mode);
int fclose(FILE* stream);
pid_t fork(void);
long syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6);
int clone(int (*fn)(void*), void* stack, int flags, void* arg, void* parent_tid,
          void* tls, void* child_tid);
int execve(const char* path, char* const argv[], char* const envp[]);
int execvp(const char* file, char* const argv[]);
int execvpe(const char* file, char* const argv[], char* const envp[]);
int fexecve(int fd, char* const argv[], char* const envp[]);
int execveat(int dirfd, const char* path, char* const argv[],
             char* const envp[], int flags);

}  // namespace vsocket::preload::real

#endif  // VSOCKET_PRELOAD_REAL_CALLS_H_
