// The data calls of a connected stream socket with hostile arguments, on a
// real shared-memory vsocket connection, compared call by call with the same
// calls on a kernel TCP loopback connection.
//
// Covers: sendmsg, recvmsg, send, recv, writev, readv, write and read
// through the explicit API (vsocket_*: the functions the interposer's
// wrappers call for a virtual socket, preload/interpose_io.cc, so the
// argument checks a preloaded program meets), with
//  - flags: any 32-bit word, or a mix of the MSG_* bits (kFlagTable);
//  - iovec arrays: NULL, unreadable (PROT_NONE), ending one entry short of
//    an unreadable page, counts from negative to past UIO_MAXIOV;
//  - buffers: NULL, (void*)1, PROT_NONE, read-only, or inside a writable
//    area that an unreadable guard follows (so a length past its end
//    faults), with lengths up to SIZE_MAX;
//  - msghdr: NULL, unreadable, read-only, cut by an unreadable page at any
//    field, and its msg_name/msg_namelen, msg_control/msg_controllen,
//    msg_flags;
//  - blocking and O_NONBLOCK sockets (a wait is bounded: SO_RCVTIMEO and
//    SO_SNDTIMEO are 1 ms, and at most one call per input may wait);
//  - at most one shutdown() per input (the pairs are then rebuilt).
// Both connections are made once per process (vsocket_transport_name says
// "shm" for both ends, checked after every input) and left drained by
// every input.
//
// Input: operations until the input ends (at most kMaxOps), each an opcode
// byte and its arguments; missing bytes read as zeros.
//   opcode 0xcf/0xdf/0xef/0xff: shutdown, then a byte: bit 0 the end
//     (client, server), (byte >> 1) % 3 the how;
//   else: bits 0-3 % 8 the call (Call), bit 4 the direction (0: the client
//     sends, the server receives), bit 5 a blocking socket, bits 6-7 == 3
//     that it may sleep (else the harness adds MSG_DONTWAIT, or
//     O_NONBLOCK for read/write, to a call that would wait); then
//     the flags (TakeFlags; ignored by read/write/readv/writev), the
//     buffer (TakeBuffer) or array (TakeIovSpec), and for sendmsg and
//     recvmsg the msghdr (TakeMsgSpec).
//
// Compares, for every call: the return value, errno, whether SIGPIPE was
// raised, the msghdr fields a receive writes back, what the receive took
// off the stream (FIONREAD before and after), every byte of the receive
// area (both paths' areas start with the same filling), and the bytes each
// path delivers against what that path's sends accepted.  At the end of
// each input the rest of both streams is read and compared.
//
// What kernel TCP itself does not fix, and so is not compared exactly
// (each path must still give an answer the kernel could give, and the
// streams are brought back in line by draining both):
//  - a call whose buffers fault after some readable (or writable) bytes:
//    the kernel moves whole socket-buffer chunks before the fault, so the
//    count is -1/EFAULT or any count up to the bytes before the fault, and
//    a faulting copy leaves some of the bytes up to the fault written;
//  - a send of more than kCap bytes in flight: how much is taken depends
//    on buffer sizes (docs/COMPATIBILITY.md, SO_SNDBUF/SO_RCVBUF);
//  - MSG_MORE: both paths hold the bytes (pushed with TCP_CORK off
//    before comparing).
// Documented differences (docs/COMPATIBILITY.md): MSG_OOB on send is
// EOPNOTSUPP on shared memory (the kernel call is not made, as it would
// put urgent data in the kernel's stream); the others are in Explained().
// OPEN differences (not documented; found with this target, reported
// 2026-12-07, noted once on stderr when met): a buffer that ends past the
// top of the user address space (Explained), data sent to an end that
// shut down both ways (RunSend).
#include <fcntl.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "vsocket/vsocket.h"

namespace {

using vsocket_fuzz::FuzzInput;

constexpr size_t kPage = 4096;
constexpr size_t kArena = 64 * 1024;          // a path's buffer area
constexpr size_t kGuard = 4 * 1024 * 1024;    // PROT_NONE after it: > ring size
constexpr size_t kMaxIov = UIO_MAXIOV;        // entries an array may hold
constexpr size_t kCap = 32 * 1024;            // bytes in flight compared exactly
constexpr int kMaxOps = 32;
constexpr int kMaxWaits = 1;                  // calls per input that may sleep

// ---- Memory ---------------------------------------------------------------

// `bytes` with `prot`, then kGuard bytes nobody can touch.  Far below the
// top of the address space: the kernel refuses (EFAULT) a buffer whose end
// passes that top, and send/recv ask it for MAX_RW_COUNT bytes (2 GiB) from
// the buffer even when the length is SIZE_MAX, so where mmap happens to
// put the areas must not decide an answer.
uint8_t* MapWithGuard(size_t bytes, int prot) {
  static uintptr_t next = uintptr_t{1} << 45;  // 32 TiB: x86-64 user space is 128
  size_t span = (bytes + kGuard + kPage - 1) & ~(kPage - 1);
  void* p = ::mmap(reinterpret_cast<void*>(next), span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  FUZZ_CHECK(p != MAP_FAILED);
  next += span + kPage;
  FUZZ_CHECK(::mprotect(p, bytes, prot) == 0);
  return static_cast<uint8_t*>(p);
}

// Pages both paths use as they are: nothing writes them.
struct SharedPages {
  uint8_t* none;  // PROT_NONE
  uint8_t* ro;    // PROT_READ, a fixed pattern, a guard after it
};

// One path's memory: the same layout at other addresses.
struct PathMemory {
  uint8_t* arena;    // kArena bytes, then kGuard unreadable
  iovec* iov_end;    // one past kMaxIov entries, then kGuard unreadable
  uint8_t* msg_end;  // one past a page for the msghdr, then unreadable
};

SharedPages g_shared;

// ---- The two connections ----------------------------------------------------

// The calls a path makes: libc (the kernel) or vsocket.
struct Api {
  const char* name;
  int (*socket)(int, int, int);
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*connect)(int, const sockaddr*, socklen_t);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  ssize_t (*recvmsg)(int, msghdr*, int);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*read)(int, void*, size_t);
  int (*shutdown)(int, int);
  int (*close)(int);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*getsockname)(int, sockaddr*, socklen_t*);
  int (*ioctl)(int, unsigned long, void*);
  int (*poll)(pollfd*, nfds_t, int);
  int (*fcntl)(int, int, long);
};

int KernelIoctl(int fd, unsigned long request, void* arg) { return ::ioctl(fd, request, arg); }
int KernelFcntl(int fd, int cmd, long arg) { return ::fcntl(fd, cmd, arg); }
int VsocketFcntl(int fd, int cmd, long arg) { return vsocket_fcntl(fd, cmd, arg); }
int KernelPoll(pollfd* fds, nfds_t n, int timeout) { return ::poll(fds, n, timeout); }

const Api kKernel = {"kernel", ::socket, ::bind, ::listen, ::accept, ::connect,
                     ::send, ::recv, ::sendmsg, ::recvmsg, ::writev, ::readv,
                     ::write, ::read, ::shutdown, ::close, ::setsockopt,
                     ::getsockname, KernelIoctl, KernelPoll, KernelFcntl};
const Api kVsocket = {"shm", vsocket_socket, vsocket_bind, vsocket_listen,
                      vsocket_accept, vsocket_connect, vsocket_send,
                      vsocket_recv, vsocket_sendmsg, vsocket_recvmsg,
                      vsocket_writev, vsocket_readv, vsocket_write,
                      vsocket_read, vsocket_shutdown, vsocket_close,
                      vsocket_setsockopt, vsocket_getsockname, vsocket_ioctl,
                      vsocket_poll, VsocketFcntl};

// One direction of a connection: what its sends accepted and its receiver
// has not read yet, and whether the writer shut down.
struct Direction {
  std::string pending;
  bool writer_shut = false;
  bool reader_shut = false;
};

struct Path {
  const Api* api;
  PathMemory mem;
  int fd[2] = {-1, -1};          // [0] client, [1] server
  bool nonblocking[2] = {false, false};
  Direction dir[2];              // dir[0]: client -> server
};

Path g_path[2];  // [0] kernel, [1] shared memory
bool g_ended = false;  // this input shut a connection down: rebuild after it
bool g_stop = false;   // the connections may differ from here on: stop comparing

// The call being compared, and the input's calls before it, for the
// report of a difference.
std::string g_current;
std::string g_before;

[[noreturn]] void Abort() {
  std::fprintf(stderr, "  in: %s\n  after:\n%s", g_current.c_str(), g_before.c_str());
  std::abort();
}

[[noreturn]] void Mismatch(const char* what, long long k, long long v) {
  std::fprintf(stderr, "stream_calls: %s differs: kernel %lld, shm %lld\n", what, k, v);
  Abort();
}

// Records the call about to run (and prints it, with STREAM_CALLS_TRACE
// set: a hang shows where it is).
void Now(std::string call) {
  static const bool trace = getenv("STREAM_CALLS_TRACE") != nullptr;
  if (trace) std::fprintf(stderr, "stream_calls: %s\n", call.c_str());
  if (!g_current.empty()) g_before += "    " + g_current + "\n";
  g_current = std::move(call);
}

void Connect(Path* p) {
  const Api& a = *p->api;
  int l = a.socket(AF_INET, SOCK_STREAM, 0);
  FUZZ_CHECK(l >= 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_CHECK(a.bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  FUZZ_CHECK(a.listen(l, 1) == 0);
  socklen_t len = sizeof addr;
  FUZZ_CHECK(a.getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int c = a.socket(AF_INET, SOCK_STREAM, 0);
  FUZZ_CHECK(c >= 0);
  FUZZ_CHECK(a.connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  int s = a.accept(l, nullptr, nullptr);
  FUZZ_CHECK(s >= 0);
  FUZZ_CHECK(a.close(l) == 0);
  p->fd[0] = c;
  p->fd[1] = s;
  // A call that waits gives up after 1 ms (one jiffy in the kernel).
  // Buffer sizes bound what a send too large to compare moves, and so
  // what has to be drained after it (shm: the window they make).
  timeval tv = {0, 1000};
  int bytes = 64 * 1024;
  for (int fd : p->fd) {
    FUZZ_CHECK(a.setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) == 0);
    FUZZ_CHECK(a.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) == 0);
    // No Nagle wait for an ACK before a small segment goes out: Settle
    // would wait for the peer's delayed ACK (40 ms) otherwise.
    int on = 1;
    FUZZ_CHECK(a.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0);
    FUZZ_CHECK(a.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    FUZZ_CHECK(a.setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
  }
  p->nonblocking[0] = p->nonblocking[1] = false;
  p->dir[0] = p->dir[1] = Direction();
  if (p->api == &kVsocket) {
    // The point of the target: the connection is on shared memory.
    for (int fd : p->fd) {
      const char* t = vsocket_transport_name(fd);
      FUZZ_CHECK(t != nullptr && std::strcmp(t, "shm") == 0);
    }
  }
}

void Disconnect(Path* p) {
  for (int& fd : p->fd) {
    if (fd >= 0) p->api->close(fd);
    fd = -1;
  }
}

void SetNonBlocking(Path* p, int end, bool on) {
  if (p->nonblocking[end] == on) return;
  const Api& a = *p->api;
  int fl = a.fcntl(p->fd[end], F_GETFL, 0);
  FUZZ_CHECK(fl >= 0);
  FUZZ_CHECK(a.fcntl(p->fd[end], F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) == 0);
  p->nonblocking[end] = on;
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// Waits until the receiver of direction `d` holds every byte its sends
// accepted (and sees the writer's shutdown): loopback TCP delivers in a
// softirq that may run later.  Shared memory has them at once.
// REQUIRES: at most kCap bytes in flight (more may wait in the sender's
// queue for the receiver's window).
void Settle(Path* p, int d) {
  const Api& a = *p->api;
  int fd = p->fd[1 - d];
  const Direction& dir = p->dir[d];
  FUZZ_CHECK(dir.pending.size() <= kCap);
  int64_t deadline = NowMs() + 5000;
  for (int spins = 0;; ++spins) {
    int n = -1;
    FUZZ_CHECK(a.ioctl(fd, FIONREAD, &n) == 0);
    bool ready = n >= 0 && size_t(n) >= dir.pending.size();
    if (ready && dir.writer_shut) {
      pollfd pfd = {fd, POLLRDHUP, 0};
      ready = a.poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLRDHUP);
    }
    if (ready) {
      FUZZ_CHECK(size_t(n) == dir.pending.size());
      return;
    }
    if (NowMs() > deadline) {
      std::fprintf(stderr, "stream_calls: %s: %d of %zu bytes readable after 5 s\n",
                   a.name, n, dir.pending.size());
      Abort();
    }
    if (spins > 100) ::usleep(100);
  }
}

// Reads everything direction `d` holds and checks it is what was sent.
void Drain(Path* p, int d) {
  Direction& dir = p->dir[d];
  const Api& a = *p->api;
  int fd = p->fd[1 - d];
  static std::vector<char> buf(8 << 20);
  size_t got = 0;
  int64_t deadline = NowMs() + 5000;
  while (got < dir.pending.size()) {
    ssize_t n = a.recv(fd, buf.data() + got, std::min(buf.size(), dir.pending.size()) - got,
                       MSG_DONTWAIT);
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    // Nothing yet: the rest waits in the kernel sender's queue for window.
    // (After SHUT_RD an empty queue reads as 0, not EAGAIN.)
    if (((n < 0 && errno == EAGAIN) || (n == 0 && dir.reader_shut)) && NowMs() < deadline) {
      pollfd pfd = {fd, POLLIN, 0};
      if (a.poll(&pfd, 1, 1) > 0 && n == 0) ::usleep(100);
      continue;
    }
    std::fprintf(stderr, "stream_calls: %s: drain: recv %zd errno %d after %zu of %zu\n",
                 a.name, n, errno, got, dir.pending.size());
    Abort();
  }
  FUZZ_CHECK(std::memcmp(buf.data(), dir.pending.data(), got) == 0);
  dir.pending.clear();
}

// ---- Arguments --------------------------------------------------------------

// Where a pointer points.  The same class on both paths gives the same
// answers: the writable arena is each path's own, at the same offset.
enum class Where : uint8_t { kInArena, kArenaEnd, kNull, kOne, kNone, kRo, kCount };

struct Buffer {
  Where where = Where::kInArena;
  uint32_t offset = 0;
  uint64_t len = 0;
};

constexpr uint64_t kSpecialLens[] = {
    0, 1, 4095, 4096, uint64_t{SSIZE_MAX}, uint64_t{SSIZE_MAX} + 1, SIZE_MAX,
    uint64_t{1} << 31, 0x7ffff000, uint64_t{1} << 32, uint64_t{1} << 40,
    uint64_t{1} << 47, uint64_t{1} << 62, kArena, kArena + 1, kCap};

Buffer TakeBuffer(FuzzInput& in) {
  Buffer b;
  uint8_t sel = in.Take<uint8_t>();
  b.where = static_cast<Where>((sel & 7) % uint8_t(Where::kCount));
  if (sel & 0x08 && b.where == Where::kArenaEnd) b.where = Where::kInArena;
  b.offset = in.Take<uint16_t>();
  switch ((sel >> 4) & 3) {
    case 0: b.len = in.Take<uint8_t>(); break;
    case 1: b.len = in.Take<uint16_t>() % (kArena + 1); break;
    case 2: b.len = kSpecialLens[in.Take<uint8_t>() % std::size(kSpecialLens)]; break;
    case 3: b.len = in.Take<uint64_t>(); break;
  }
  return b;
}

void* Address(const Path& p, const Buffer& b) {
  switch (b.where) {
    case Where::kInArena: return p.mem.arena + b.offset % kArena;
    case Where::kArenaEnd: return p.mem.arena + kArena - b.offset % 257;
    case Where::kNull: return nullptr;
    case Where::kOne: return reinterpret_cast<void*>(1);
    case Where::kNone: return g_shared.none + b.offset % kPage;
    case Where::kRo: return g_shared.ro + b.offset % kPage;
    case Where::kCount: break;
  }
  std::abort();
}

// Bytes from the start of `b` that can be read (writing: written) before
// a fault; `*faults` when its length reaches past them.
uint64_t Accessible(const Path& p, const Buffer& b, bool writing, bool* faults) {
  uint64_t room = 0;
  const uint8_t* at = static_cast<const uint8_t*>(Address(p, b));
  switch (b.where) {
    case Where::kInArena:
    case Where::kArenaEnd: room = uint64_t(p.mem.arena + kArena - at); break;
    case Where::kRo: room = writing ? 0 : uint64_t(g_shared.ro + kPage - at); break;
    default: room = 0;
  }
  *faults = b.len > room;
  return std::min(b.len, room);
}

// An iovec array as the input describes it: up to 8 entries, repeated to
// fill `count`, and where the array itself lies.
enum class ArrayAt : uint8_t { kFits, kNull, kNone, kShort };

struct IovSpec {
  std::vector<Buffer> entries;  // described; entry i is entries[i % size]
  uint64_t count = 0;           // as the call is given it
  ArrayAt at = ArrayAt::kFits;
};

constexpr uint64_t kSpecialCounts[] = {
    0, 1, 64, UIO_MAXIOV - 1, UIO_MAXIOV, UIO_MAXIOV + 1, 2048,
    uint64_t(INT_MAX), uint64_t(INT_MAX) + 1, uint64_t(UINT_MAX),
    (uint64_t{1} << 32) + 1, SIZE_MAX};

IovSpec TakeIovSpec(FuzzInput& in) {
  IovSpec s;
  uint8_t sel = in.Take<uint8_t>();
  size_t described = sel & 7;
  for (size_t i = 0; i < described; ++i) s.entries.push_back(TakeBuffer(in));
  if (s.entries.empty()) s.entries.push_back(Buffer());
  switch ((sel >> 3) & 3) {
    case 0:
    case 1: s.count = described; break;
    case 2: s.count = kSpecialCounts[in.Take<uint8_t>() % std::size(kSpecialCounts)]; break;
    case 3: s.count = in.Take<uint16_t>() % (kMaxIov + 2); break;
  }
  static constexpr ArrayAt kAt[8] = {ArrayAt::kFits, ArrayAt::kFits, ArrayAt::kFits,
                                     ArrayAt::kFits, ArrayAt::kNull, ArrayAt::kNone,
                                     ArrayAt::kShort, ArrayAt::kFits};
  s.at = kAt[(sel >> 5) & 7];
  return s;
}

// The array for `p`, or a bad address; it ends where an unreadable page
// begins (kShort: one entry into it).
const iovec* BuildArray(const Path& p, const IovSpec& s) {
  switch (s.at) {
    case ArrayAt::kNull: return nullptr;
    case ArrayAt::kNone: return reinterpret_cast<const iovec*>(g_shared.none);
    default: break;
  }
  size_t n = size_t(std::min<uint64_t>(s.count, kMaxIov));
  size_t in_room = (s.at == ArrayAt::kShort && n > 0) ? n - 1 : n;
  iovec* first = p.mem.iov_end - in_room;
  for (size_t i = 0; i < in_room; ++i) {
    const Buffer& b = s.entries[i % s.entries.size()];
    first[i].iov_base = Address(p, b);
    first[i].iov_len = b.len;
  }
  return first;
}

// What the kernel (and vsocket) may do with the array, before any data:
// the entries that can be read, their lengths summed (saturating), and
// the accessible prefix.
struct ArrayFacts {
  bool readable = true;   // the array (as many entries as the call reads)
  uint64_t total = 0;     // saturating sum of the lengths (readable entries)
  uint64_t prefix = 0;    // bytes accessible before the first fault
  bool faults = false;    // the lengths reach past the accessible bytes
  bool negative = false;  // an entry above SSIZE_MAX: EINVAL on both
  bool past_top = false;  // an entry ends past the top of user space
};

// The kernel's access_ok(): a range ending past the top of the user
// address space (or wrapping) is EFAULT before any byte moves.  x86-64:
// TASK_SIZE_MAX, 2^47 - 4096 with 4-level page tables, 2^56 - 4096 with 5.
uintptr_t UserTop() {
  static const uintptr_t top = [] {
    void* high = ::mmap(reinterpret_cast<void*>(uintptr_t{1} << 50), kPage, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool five_level = high != MAP_FAILED && uintptr_t(high) >= (uintptr_t{1} << 47);
    if (high != MAP_FAILED) ::munmap(high, kPage);
    return (uintptr_t{1} << (five_level ? 56 : 47)) - kPage;
  }();
  return top;
}

bool PastTop(const void* base, uint64_t len) {
  uintptr_t b = reinterpret_cast<uintptr_t>(base);
  return b + len < b || b + len > UserTop();
}

ArrayFacts Facts(const Path& p, const IovSpec& s, bool writing) {
  ArrayFacts f;
  uint64_t n = s.count;
  if (n > kMaxIov) return f;  // refused before the array is read
  if (n > 0 && (s.at != ArrayAt::kFits)) f.readable = false;
  // The entries that can be read (the facts are about them).
  if (s.at == ArrayAt::kNull || s.at == ArrayAt::kNone) n = 0;
  if (s.at == ArrayAt::kShort && n > 0) n -= 1;
  for (uint64_t i = 0; i < n; ++i) {
    const Buffer& b = s.entries[i % s.entries.size()];
    f.total = (f.total + b.len < f.total) ? UINT64_MAX : f.total + b.len;
    f.negative |= b.len > uint64_t{SSIZE_MAX};
    f.past_top |= PastTop(Address(p, b), b.len);
    if (f.faults || b.len == 0) continue;
    bool faults;
    f.prefix += Accessible(p, b, writing, &faults);
    f.faults = faults;
  }
  return f;
}

// ---- One call on both paths -------------------------------------------------

struct Result {
  long long rc = 0;
  int err = 0;
  bool sigpipe = false;
  // recvmsg's msghdr as it is after the call (when it could be read)
  uint64_t namelen = 0, controllen = 0;
  int msg_flags = 0;
};

bool TakeSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  timespec zero = {0, 0};
  return sigtimedwait(&set, nullptr, &zero) == SIGPIPE;
}

enum Call : uint8_t { kSendmsg, kRecvmsg, kSend, kRecv, kWritev, kReadv, kWrite, kRead };

bool IsSend(Call c) { return c == kSendmsg || c == kSend || c == kWritev || c == kWrite; }

// msghdr placement.
enum class MsgAt : uint8_t { kRw, kNull, kNone, kRo, kCut };

struct MsgSpec {
  MsgAt at = MsgAt::kRw;
  Buffer name, control;
  bool has_name = false, has_control = false;
  uint32_t namelen = 0;
  uint64_t controllen = 0;
  int flags_in = 0;
  uint8_t cut = 16;  // kCut: bytes of the msghdr before the unreadable page
};

MsgSpec TakeMsgSpec(FuzzInput& in) {
  MsgSpec m;
  uint8_t sel = in.Take<uint8_t>();
  static constexpr MsgAt kAt[8] = {MsgAt::kRw,   MsgAt::kRw,  MsgAt::kRw,
                                   MsgAt::kNull, MsgAt::kNone, MsgAt::kRo,
                                   MsgAt::kCut,  MsgAt::kRw};
  m.at = kAt[sel & 7];
  m.has_name = sel & 0x08;
  m.has_control = sel & 0x10;
  if (m.has_name) {
    m.name = TakeBuffer(in);
    m.namelen = (sel & 0x20) ? in.Take<uint32_t>() : in.Take<uint8_t>();
  }
  if (m.has_control) {
    m.control = TakeBuffer(in);
    m.controllen = (sel & 0x40) ? in.Take<uint64_t>() : in.Take<uint8_t>();
  }
  if (sel & 0x80) m.flags_in = in.Take<int>();
  if (m.at == MsgAt::kCut) m.cut = 8 * (1 + in.Take<uint8_t>() % (sizeof(msghdr) / 8 - 1));
  return m;
}

// The msghdr for `p`; `*cleanup` restores a read-only page after the call.
msghdr* BuildMsg(const Path& p, const MsgSpec& m, const iovec* iov, uint64_t iovlen,
                 bool* reprotect) {
  *reprotect = false;
  switch (m.at) {
    case MsgAt::kNull: return nullptr;
    case MsgAt::kNone: return reinterpret_cast<msghdr*>(g_shared.none);
    default: break;
  }
  msghdr h = {};
  h.msg_name = m.has_name ? Address(p, m.name) : nullptr;
  h.msg_namelen = m.namelen;
  h.msg_iov = const_cast<iovec*>(iov);
  h.msg_iovlen = iovlen;
  h.msg_control = m.has_control ? Address(p, m.control) : nullptr;
  h.msg_controllen = m.controllen;
  h.msg_flags = m.flags_in;
  uint8_t* page = p.mem.msg_end - kPage;
  if (m.at == MsgAt::kCut) {
    // The first m.cut bytes readable, the rest on the unreadable page.
    uint8_t* at = p.mem.msg_end - m.cut;
    std::memcpy(at, &h, m.cut);
    return reinterpret_cast<msghdr*>(at);
  }
  auto* msg = reinterpret_cast<msghdr*>(page);
  *msg = h;
  if (m.at == MsgAt::kRo) {
    FUZZ_CHECK(::mprotect(page, kPage, PROT_READ) == 0);
    *reprotect = true;
  }
  return msg;
}

constexpr int kMsgCmsgCompat = int(0x80000000u);  // MSG_CMSG_COMPAT: the kernel's own

// The flags a mask picks from (bit i: kFlagTable[i]).
constexpr int kFlagTable[] = {
    MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC, MSG_NOSIGNAL, MSG_MORE,
    MSG_ERRQUEUE, MSG_OOB, MSG_EOR, MSG_DONTROUTE, MSG_CONFIRM,
    MSG_CMSG_CLOEXEC, MSG_ZEROCOPY, MSG_FASTOPEN, MSG_WAITFORONE, kMsgCmsgCompat};

int TakeFlags(FuzzInput& in) {
  uint8_t mode = in.Take<uint8_t>();
  if (mode & 1) return in.Take<int>();
  uint16_t mask = in.Take<uint16_t>();
  int flags = 0;
  for (size_t i = 0; i < std::size(kFlagTable); ++i)
    if (mask & (1u << i)) flags |= kFlagTable[i];
  return flags;
}

// Fills both arenas (and so what sends read, and what a receive leaves
// alone) with the same bytes, different for each call.
void FillArena(uint8_t* arena, uint32_t call_no) {
  constexpr size_t kPeriod = 251;  // prime: a shift changes every byte
  static const std::vector<uint8_t> pattern = [] {
    std::vector<uint8_t> bytes(kArena + kPeriod);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t((i * 131 + (i >> 8)) & 0xff);
    return bytes;
  }();
  std::memcpy(arena, pattern.data() + call_no % kPeriod, kArena);
}
void FillArenas(uint32_t call_no) {
  for (Path& p : g_path) FillArena(p.mem.arena, call_no);
}

// The bytes a send of `s` over `p` took, its first `n` accessible ones.
std::string Gather(const Path& p, const std::vector<Buffer>& entries, uint64_t count,
                   uint64_t n, bool writing) {
  std::string out;
  for (uint64_t i = 0; i < count && out.size() < n; ++i) {
    const Buffer& b = entries[i % entries.size()];
    bool faults;
    uint64_t room = Accessible(p, b, writing, &faults);
    uint64_t take = std::min<uint64_t>(room, n - out.size());
    out.append(static_cast<const char*>(Address(p, b)), take);
    if (b.len > room) break;
  }
  return out;
}

struct Op {
  Call call;
  int dir;         // 0: the client sends / the server receives
  bool blocking;   // the socket without O_NONBLOCK
  int flags;
  IovSpec iov;     // readv/writev/msghdr calls; entries[0] for send/recv
  MsgSpec msg;
};

const char* const kCallNames[] = {"sendmsg", "recvmsg", "send", "recv",
                                  "writev",  "readv",   "write", "read"};
const char* const kWhereNames[] = {"arena", "arena_end", "NULL", "(void*)1", "PROT_NONE", "read_only"};

std::string DescribeBuffer(const Buffer& b) {
  char out[96];
  std::snprintf(out, sizeof out, "{%s+%u, %llu}", kWhereNames[int(b.where)], b.offset,
                (unsigned long long)b.len);
  return out;
}

std::string Describe(const Op& op, int flags, size_t queued) {
  char head[160];
  std::snprintf(head, sizeof head, "%s dir %d %s flags 0x%x queued %zu count %llu array %d msg %d ",
                kCallNames[op.call], op.dir, op.blocking ? "blocking" : "O_NONBLOCK",
                unsigned(flags), queued, (unsigned long long)op.iov.count, int(op.iov.at),
                int(op.msg.at));
  std::string out = head;
  for (const Buffer& b : op.iov.entries) out += DescribeBuffer(b);
  if (op.call == kSendmsg || op.call == kRecvmsg) {
    char tail[128];
    std::snprintf(tail, sizeof tail, " name %s namelen %u control %s controllen %llu",
                  op.msg.has_name ? DescribeBuffer(op.msg.name).c_str() : "-", op.msg.namelen,
                  op.msg.has_control ? DescribeBuffer(op.msg.control).c_str() : "-",
                  (unsigned long long)op.msg.controllen);
    out += tail;
  }
  return out;
}

Result Run(Path& p, const Op& op, int flags) {
  int end = IsSend(op.call) ? op.dir : 1 - op.dir;
  int fd = p.fd[end];
  SetNonBlocking(&p, end, !op.blocking);
  const Api& a = *p.api;
  const Buffer& one = op.iov.entries[0];
  Result r;
  bool reprotect = false;
  msghdr* msg = nullptr;
  const iovec* iov = nullptr;
  if (op.call == kSendmsg || op.call == kRecvmsg || op.call == kWritev || op.call == kReadv)
    iov = BuildArray(p, op.iov);
  if (op.call == kSendmsg || op.call == kRecvmsg)
    msg = BuildMsg(p, op.msg, iov, op.iov.count, &reprotect);
  int iovcnt = int(uint32_t(op.iov.count));  // readv/writev take an int
  ssize_t n = -1;
  // A wait that a signal cut short (libFuzzer's SIGALRM, once a second)
  // moved nothing: -1/EINTR is the signal's, not the call's; again.
  for (int tries = 0; tries < 10; ++tries) {
  errno = 0;
  switch (op.call) {
    case kSendmsg: n = a.sendmsg(fd, msg, flags); break;
    case kRecvmsg: n = a.recvmsg(fd, msg, flags); break;
    case kSend: n = a.send(fd, Address(p, one), one.len, flags); break;
    case kRecv: n = a.recv(fd, Address(p, one), one.len, flags); break;
    case kWritev: n = a.writev(fd, iov, iovcnt); break;
    case kReadv: n = a.readv(fd, iov, iovcnt); break;
    case kWrite: n = a.write(fd, Address(p, one), one.len); break;
    case kRead: n = a.read(fd, Address(p, one), one.len); break;
  }
  if (!(n == -1 && errno == EINTR && op.blocking)) break;
  }
  r.rc = n;
  r.err = n < 0 ? errno : 0;
  r.sigpipe = TakeSigpipe();
  if (reprotect) FUZZ_CHECK(::mprotect(p.mem.msg_end - kPage, kPage, PROT_READ | PROT_WRITE) == 0);
  if (msg != nullptr && (op.msg.at == MsgAt::kRw || op.msg.at == MsgAt::kRo)) {
    r.namelen = msg->msg_namelen;
    r.controllen = msg->msg_controllen;
    r.msg_flags = msg->msg_flags;
  }
  return r;
}

void Expect(bool same, const char* what, long long k, long long v) {
  if (!same) Mismatch(what, k, v);
}

void ExpectSame(const Result& k, const Result& v) {
  Expect(k.rc == v.rc, "return value", k.rc, v.rc);
  if (k.rc < 0) Expect(k.err == v.err, "errno", k.err, v.err);
  Expect(k.sigpipe == v.sigpipe, "SIGPIPE", k.sigpipe, v.sigpipe);
  Expect(k.namelen == v.namelen, "msg_namelen after the call", (long long)k.namelen,
         (long long)v.namelen);
  Expect(k.controllen == v.controllen, "msg_controllen after the call",
         (long long)k.controllen, (long long)v.controllen);
  Expect(k.msg_flags == v.msg_flags, "msg_flags after the call", k.msg_flags, v.msg_flags);
}

// The counts kernel TCP may return when its copy faults partway or the
// buffers fill: -1 with EFAULT (a fault) or EAGAIN (full), else 1..prefix.
bool Tolerable(const Result& r, uint64_t prefix, bool faults, bool full) {
  if (r.rc < 0) return (faults && r.err == EFAULT) || (full && r.err == EAGAIN);
  return r.rc > 0 && uint64_t(r.rc) <= prefix;
}

// Which part of an op's buffers the call sees: its array, or its one buffer.
ArrayFacts OpFacts(const Path& p, const Op& op, bool writing) {
  if (op.call == kSend || op.call == kRecv || op.call == kWrite || op.call == kRead) {
    IovSpec one;
    one.entries = {op.iov.entries[0]};
    one.count = 1;
    // send/recv: the kernel caps the length at MAX_RW_COUNT first.
    if (op.call == kSend || op.call == kRecv)
      one.entries[0].len = std::min<uint64_t>(one.entries[0].len, 0x7ffff000);
    return Facts(p, one, writing);
  }
  IovSpec spec = op.iov;
  if (op.call == kWritev || op.call == kReadv) {
    int iovcnt = int(uint32_t(op.iov.count));  // as Run passes it
    if (iovcnt < 0) return ArrayFacts();      // refused before the array
    spec.count = uint64_t(iovcnt);
  }
  ArrayFacts f = Facts(p, spec, writing);
  // One entry is taken as send/recv take their buffer (import_ubuf): its
  // length capped first.
  if (spec.count == 1 && spec.at == ArrayAt::kFits) {
    const Buffer& b = spec.entries[0];
    f.past_top = PastTop(Address(p, b), std::min<uint64_t>(b.len, 0x7ffff000));
  }
  return f;
}

bool MsgReadable(const Op& op) {
  if (op.call != kSendmsg && op.call != kRecvmsg) return true;
  return op.msg.at == MsgAt::kRw || op.msg.at == MsgAt::kRo;
}

// Answers that may differ, and how each side must answer then.  Called
// only once the two answers differ (and no tolerance above covers it);
// true when the difference is one of these.
//  - Documented (docs/COMPATIBILITY.md, read/recvmsg row): an array whose
//    total is above SSIZE_MAX is -1/EINVAL on vsocket.  (The kernel caps
//    the total at MAX_RW_COUNT and moves what it can.)
//  - Documented (ancillary data is not supported on shared memory): a
//    sendmsg with msg_control may be refused by the kernel (ENOBUFS above
//    its option memory, EFAULT, EINVAL for control messages TCP does not
//    take), while vsocket does not look at it.
//  - OPEN, not documented (reported 2026-12-07 with this target): a buffer
//    that ends past the top of the user address space is -1/EFAULT from
//    the kernel before anything moves (access_ok: read and write ask it of
//    their length; the vector calls of every entry when there are two or
//    more; one entry, send and recv only of the length capped at
//    MAX_RW_COUNT, which our areas never pass); vsocket has no such check,
//    moves what it can until its copy faults, and a receive returns what
//    is queued.  Noted once on stderr when met.  Remove this case once
//    vsocket checks the range or COMPATIBILITY.md lists the difference.
// `most`: the largest count the call could return (what it can reach).
bool Explained(const Op& op, const ArrayFacts& f, const Result& rk, const Result& rv,
               uint64_t most) {
  if (f.negative || !MsgReadable(op)) return false;
  long long k = rk.rc < 0 ? -rk.err : rk.rc, v = rv.rc < 0 ? -rv.err : rv.rc;
  // (vsocket sums as it reads the array: the total can pass SSIZE_MAX
  // before an entry it cannot read, where the kernel says EFAULT.)
  if (f.total > uint64_t{SSIZE_MAX}) {
    Expect(rv.rc == -1 && (rv.err == EINVAL || rv.err == EFAULT),
           "a total above SSIZE_MAX (documented: -1/EINVAL; -errno or count)", k, v);
    return true;
  }
  if (!f.readable) return false;
  if (op.call == kSendmsg && op.msg.has_control && op.msg.controllen > 0) {
    Expect(rk.rc == -1 && (rk.err == ENOBUFS || rk.err == EFAULT || rk.err == EINVAL),
           "sendmsg with ancillary data (documented: not looked at; -errno or count)", k, v);
    return true;
  }
  if (!f.past_top) return false;
  static bool noted = false;
  if (!noted) {
    noted = true;
    std::fprintf(stderr, "stream_calls: OPEN difference (not documented): a buffer past the "
                         "top of user space: kernel %lld, shm %lld (-errno or count)\n  in: %s\n",
                 k, v, g_current.c_str());
  }
  Expect(rk.rc == -1 && rk.err == EFAULT,
         "a buffer past the top of user space (kernel: -1/EFAULT; -errno or count)", k, v);
  Expect(rv.rc == -1 || uint64_t(rv.rc) <= most,
         "a buffer past the top of user space (shm: -1 or the accessible bytes)", k, v);
  return true;
}

bool Same(const Result& k, const Result& v) {
  return k.rc == v.rc && (k.rc >= 0 || k.err == v.err) && k.sigpipe == v.sigpipe &&
         k.namelen == v.namelen && k.controllen == v.controllen && k.msg_flags == v.msg_flags;
}

// Compares one call's answers; true when the streams may now differ (the
// caller then drains both).
// Whether Explained may apply to the call (then even equal answers may
// hide different effects: what a receive consumed, or wrote).
bool Explainable(const Op& op, const ArrayFacts& f) {
  if (f.negative || !MsgReadable(op)) return false;
  if (f.total > uint64_t{SSIZE_MAX}) return true;
  if (!f.readable) return false;
  return f.past_top || (op.call == kSendmsg && op.msg.has_control && op.msg.controllen > 0);
}

bool Compare(const Op& op, const ArrayFacts& f, const Result& rk, const Result& rv,
             bool exact, bool faults, bool full, uint64_t most) {
  if (Same(rk, rv)) return Explainable(op, f);
  if (!exact && Tolerable(rk, f.prefix, faults, full) && Tolerable(rv, f.prefix, faults, full) &&
      rk.sigpipe == rv.sigpipe)
    return true;
  if (Explained(op, f, rk, rv, most)) return true;
  ExpectSame(rk, rv);
  return true;  // not reached
}

void RunSend(const Op& op, int flags, uint32_t call_no) {
  FillArenas(call_no);
  Path& k = g_path[0];
  Path& v = g_path[1];
  if (flags & MSG_OOB) {
    // Documented: shared memory cannot carry urgent data: EOPNOTSUPP, after
    // only the check sendmsg makes before it looks at the socket.
    int want = (op.call == kSendmsg && (flags & kMsgCmsgCompat)) ? EINVAL : EOPNOTSUPP;
    Result rv = Run(v, op, flags);
    Expect(rv.rc == -1 && rv.err == want, "MSG_OOB send (documented: -1/EOPNOTSUPP)", -want,
           rv.rc < 0 ? -rv.err : rv.rc);
    return;
  }
  ArrayFacts f = OpFacts(k, op, false);
  Direction& dk = k.dir[op.dir];
  bool full = dk.pending.size() + f.prefix > kCap;
  bool exact = !full && !(f.faults && f.readable && MsgReadable(op));
  Result rk = Run(k, op, flags);
  // MSG_MORE holds the bytes for up to ~200 ms on both paths; what is
  // delivered is compared, so both push them now: TCP_CORK off pushes what
  // is held, and is otherwise a no-op here.
  int off = 0;
  if (flags & MSG_MORE)
    FUZZ_CHECK(::setsockopt(k.fd[op.dir], IPPROTO_TCP, TCP_CORK, &off, sizeof off) == 0);
  Result rv = Run(v, op, flags);
  if (flags & MSG_MORE)
    FUZZ_CHECK(v.api->setsockopt(v.fd[op.dir], IPPROTO_TCP, TCP_CORK, &off, sizeof off) == 0);
  if (Compare(op, f, rk, rv, exact, f.faults, full, f.prefix)) full = true;  // drain below
  if (rk.rc > 0 && k.dir[op.dir].reader_shut && k.dir[1 - op.dir].writer_shut) {
    // OPEN, not documented (reported 2026-12-07 with this target): data
    // sent to an end that shut down both ways makes Linux reset the
    // connection (RFC 1122; tcp_rcv_state_process in FIN_WAIT with
    // RCV_SHUTDOWN): the sender's next calls fail with EPIPE, the other
    // end's with ECONNRESET.  Shared memory keeps the bytes, and the
    // connection.  The two connections differ from here: this input stops
    // and both are rebuilt.  Remove once vsocket resets, or COMPATIBILITY.md
    // lists it.
    static bool noted = false;
    if (!noted) {
      noted = true;
      std::fprintf(stderr, "stream_calls: OPEN difference (not documented): data sent to an end "
                           "that shut down both ways: kernel TCP resets, shm does not\n");
    }
    g_stop = true;
    return;
  }
  std::vector<Buffer> entries = op.iov.entries;
  uint64_t count = op.iov.count;
  if (op.call == kSend || op.call == kWrite) {
    entries = {op.iov.entries[0]};
    count = 1;
  }
  for (Path* p : {&k, &v}) {
    const Result& r = p == &k ? rk : rv;
    if (r.rc > 0) p->dir[op.dir].pending += Gather(*p, entries, count, uint64_t(r.rc), false);
  }
  if (k.dir[op.dir].pending.size() != v.dir[op.dir].pending.size() || full) {
    // Back in line: both receivers read everything (the kernel's as its
    // sender's queue drains into it).
    Drain(&k, op.dir);
    Drain(&v, op.dir);
  }
}

// The receive area of `p` after a receive wrote the first `n` bytes of
// `pending` into the op's buffers, in order.
// `may`, if set, collects every value each byte may hold on the way.
void ExpectedArea(const Path& p, const Op& op, uint32_t call_no, const std::string& pending,
                  uint64_t n, uint8_t* area, std::vector<std::bitset<256>>* may) {
  std::vector<Buffer> entries = op.iov.entries;
  uint64_t count = op.iov.count;
  if (op.call == kRecv || op.call == kRead) {
    entries = {op.iov.entries[0]};
    count = 1;
  }
  FillArena(area, call_no);
  if (may)
    for (size_t b = 0; b < kArena; ++b) (*may)[b].set(area[b]);
  uint64_t placed = 0;
  for (uint64_t e = 0; e < count && placed < n; ++e) {
    const Buffer& b = entries[e % entries.size()];
    bool faults;
    uint64_t room = Accessible(p, b, true, &faults);
    uint64_t take = std::min<uint64_t>(room, n - placed);
    if (take > 0) {
      size_t at = size_t(static_cast<uint8_t*>(Address(p, b)) - p.mem.arena);
      std::memcpy(area + at, pending.data() + placed, size_t(take));
      if (may)
        for (uint64_t j = 0; j < take; ++j) (*may)[at + j].set(uint8_t(pending[placed + j]));
    }
    placed += take;
    if (b.len > room) break;
  }
  Expect(placed == n, "received bytes in the buffers", (long long)placed, (long long)n);
}

int Readable(const Path& p, int d) {
  int n = -1;
  FUZZ_CHECK(p.api->ioctl(p.fd[1 - d], FIONREAD, &n) == 0 && n >= 0);
  return n;
}

void RunRecv(const Op& op, int flags, uint32_t call_no) {
  Path& k = g_path[0];
  Path& v = g_path[1];
  Settle(&k, op.dir);
  Settle(&v, op.dir);
  FillArenas(call_no);
  ArrayFacts f = OpFacts(k, op, true);
  uint64_t queued = k.dir[op.dir].pending.size();
  // A receive writes min(queued, total) bytes: it faults when they reach
  // past the writable prefix (MSG_TRUNC writes nothing).
  uint64_t would_write = std::min(queued, f.total);
  bool faults = !(flags & MSG_TRUNC) && would_write > f.prefix;
  bool exact = !(faults && f.readable && MsgReadable(op));
  Result rk = Run(k, op, flags);
  Result rv = Run(v, op, flags);
  // MSG_TRUNC writes nothing: it may take all that is queued.
  uint64_t most = (flags & MSG_TRUNC) ? queued : f.prefix;
  if (Compare(op, f, rk, rv, exact, true, false, most)) exact = false;
  // What each receive took off its stream (nothing arrives meanwhile): the
  // count it returned, or with a read-only msghdr (-1/EFAULT after the
  // copy, as the kernel's) what it copied.
  uint64_t consumed[2];
  for (int i = 0; i < 2; ++i) {
    uint64_t left = uint64_t(Readable(g_path[i], op.dir));
    FUZZ_CHECK(left <= queued);
    consumed[i] = queued - left;
  }
  if (exact) {
    Expect(consumed[0] == consumed[1], "bytes consumed", (long long)consumed[0],
           (long long)consumed[1]);
    Expect(std::memcmp(k.mem.arena, v.mem.arena, kArena) == 0, "receive area contents", 0, 1);
  }
  for (int i = 0; i < 2; ++i) {
    Path* p = &g_path[i];
    const Result& r = i == 0 ? rk : rv;
    std::string& pending = p->dir[op.dir].pending;
    if (r.rc >= 0) {
      uint64_t taken = (flags & (MSG_PEEK | MSG_ERRQUEUE)) ? 0 : uint64_t(r.rc);
      Expect(consumed[i] == taken, i == 0 ? "kernel: consumed, against the count"
                                          : "shm: consumed, against the count",
             (long long)consumed[i], r.rc);
    }
    // The bytes written into the area: the count, or what was consumed.
    uint64_t written = r.rc >= 0 ? uint64_t(r.rc) : consumed[i];
    if (flags & (MSG_TRUNC | MSG_ERRQUEUE)) written = 0;
    if (r.rc < 0 && (flags & MSG_PEEK)) written = UINT64_MAX;  // unknown: not checked
    if (written != UINT64_MAX) {
      uint64_t upto = std::min<uint64_t>(pending.size(), f.prefix);
      if (exact || (flags & MSG_TRUNC) || upto <= written) {
        // The area as the stream's next `written` bytes, written entry
        // after entry (entries may overlap), leave it.
        static std::vector<uint8_t> want(kArena);
        ExpectedArea(*p, op, call_no, pending, written, want.data(), nullptr);
        if (std::memcmp(want.data(), p->mem.arena, kArena) != 0)
          Mismatch(i == 0 ? "kernel: received bytes" : "shm: received bytes", 0, 1);
      } else {
        // A copy that faulted wrote some of the bytes up to the fault, in
        // chunks and an order memcpy chooses: each byte of the area holds
        // what it held, or one of the stream bytes an entry puts there.
        static std::vector<std::bitset<256>> may(kArena);
        static std::vector<uint8_t> scratch(kArena);
        for (auto& m : may) m.reset();
        ExpectedArea(*p, op, call_no, pending, upto, scratch.data(), &may);
        for (size_t b = 0; b < kArena; ++b)
          if (!may[b].test(p->mem.arena[b]))
            Mismatch(i == 0 ? "kernel: bytes written before a fault (area offset)"
                            : "shm: bytes written before a fault (area offset)",
                     (long long)b, p->mem.arena[b]);
      }
    }
    pending.erase(0, size_t(consumed[i]));
  }
  if (k.dir[op.dir].pending.size() != v.dir[op.dir].pending.size()) {
    Drain(&k, op.dir);
    Drain(&v, op.dir);
  }
}

void RunShutdown(int end, int how) {
  // Whatever was sent before is in: bytes that reach a kernel socket after
  // it shut down both ways reset the connection (see RunSend).
  for (int d = 0; d < 2; ++d) Settle(&g_path[0], d);
  Result r[2];
  for (int i = 0; i < 2; ++i) {
    Path& p = g_path[i];
    errno = 0;
    r[i].rc = p.api->shutdown(p.fd[end], how);
    r[i].err = r[i].rc < 0 ? errno : 0;
    if (r[i].rc == 0) {
      if (how != SHUT_RD) p.dir[end].writer_shut = true;
      if (how != SHUT_WR) p.dir[1 - end].reader_shut = true;
    }
  }
  ExpectSame(r[0], r[1]);
  g_ended = true;
}

// Whether a receive on a blocking socket would sleep until its timeout.
bool MayWait(const Op& op, int flags) {
  if (!op.blocking || (flags & MSG_DONTWAIT)) return false;
  const Direction& d = g_path[0].dir[op.dir];
  if (IsSend(op.call)) return d.pending.size() + OpFacts(g_path[0], op, false).total > kCap;
  if (flags & (MSG_ERRQUEUE | MSG_OOB)) return false;
  if (d.writer_shut || d.reader_shut) return false;
  if (d.pending.empty()) return true;
  return (flags & MSG_WAITALL) && d.pending.size() < OpFacts(g_path[0], op, true).total;
}

void Setup() {
  static bool done = false;
  if (done) return;
  done = true;
  // Before the first vsocket call, which reads the settings.
  setenv("VSOCKET_TRANSPORT", "shm", 1);
  // SIGPIPE stays pending, to be looked for after each call.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  FUZZ_CHECK(pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0);
  g_shared.none = MapWithGuard(0, PROT_NONE);
  g_shared.ro = MapWithGuard(kPage, PROT_READ | PROT_WRITE);
  for (size_t i = 0; i < kPage; ++i) g_shared.ro[i] = uint8_t(i * 7 + 3);
  FUZZ_CHECK(::mprotect(g_shared.ro, kPage, PROT_READ) == 0);
  g_path[0].api = &kKernel;
  g_path[1].api = &kVsocket;
  for (Path& p : g_path) {
    p.mem.arena = MapWithGuard(kArena, PROT_READ | PROT_WRITE);
    size_t iov_bytes = kMaxIov * sizeof(iovec);
    p.mem.iov_end = reinterpret_cast<iovec*>(MapWithGuard(iov_bytes, PROT_READ | PROT_WRITE) + iov_bytes);
    p.mem.msg_end = MapWithGuard(kPage, PROT_READ | PROT_WRITE) + kPage;
    Connect(&p);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Setup();
  g_current.clear();
  g_before.clear();
  FuzzInput in(data, size);
  int waits = 0;
  bool shut = false;
  static uint32_t call_no = 0;
  for (int i = 0; i < kMaxOps && !in.empty() && !g_stop; ++i) {
    uint8_t code = in.Take<uint8_t>();
    // 0xcf, 0xdf, 0xef, 0xff: shutdown, rarely (the connections are then
    // rebuilt, which costs more than the rest of an input).
    if ((code & 0xcf) == 0xcf) {
      uint8_t arg = in.Take<uint8_t>();
      if (shut) continue;  // one per input: later ones would race the FINs
      shut = true;
      Now("shutdown end " + std::to_string(arg & 1) + " how " + std::to_string((arg >> 1) % 3));
      RunShutdown(arg & 1, (arg >> 1) % 3);
      continue;
    }
    Op op;
    op.call = static_cast<Call>((code & 0x0f) % 8);
    op.dir = (code >> 4) & 1;
    op.blocking = (code >> 5) & 1;
    bool may_sleep = op.blocking && (code >> 6) == 3;  // else never waits
    op.flags = TakeFlags(in);
    if (op.call == kSendmsg || op.call == kRecvmsg || op.call == kWritev || op.call == kReadv) {
      op.iov = TakeIovSpec(in);
    } else {
      op.iov.entries = {TakeBuffer(in)};
      op.iov.count = 1;
    }
    if (op.call == kSendmsg || op.call == kRecvmsg) op.msg = TakeMsgSpec(in);
    int flags = op.flags;
    if (op.call == kWritev || op.call == kReadv || op.call == kWrite || op.call == kRead)
      flags = 0;  // no flags argument
    if (MayWait(op, flags)) {
      if (!may_sleep || waits >= kMaxWaits) {
        if (op.call == kWritev || op.call == kReadv || op.call == kWrite || op.call == kRead)
          op.blocking = false;
        else
          flags |= MSG_DONTWAIT;
      } else {
        ++waits;
      }
    }
    ++call_no;
    Now(Describe(op, flags, g_path[0].dir[op.dir].pending.size()));
    if (IsSend(op.call)) {
      RunSend(op, flags, call_no);
    } else {
      RunRecv(op, flags, call_no);
    }
  }
  if (g_stop) {
    for (Path& p : g_path) {
      Disconnect(&p);
      Connect(&p);
    }
    g_stop = g_ended = false;
    return 0;
  }
  // Both streams to their ends: what is left must be what was sent.
  for (int d = 0; d < 2; ++d) {
    Settle(&g_path[0], d);
    Drain(&g_path[0], d);
    Drain(&g_path[1], d);
  }
  for (Path& p : g_path) {
    for (int fd : p.fd) {
      char byte;
      errno = 0;
      // Nothing more to read (0 once the writer shut down).
      ssize_t n = p.api->recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
      FUZZ_CHECK(n == 0 || (n < 0 && errno == EAGAIN));
    }
    if (p.api == &kVsocket)
      for (int fd : p.fd) FUZZ_CHECK(std::strcmp(vsocket_transport_name(fd), "shm") == 0);
  }
  if (g_ended) {
    for (Path& p : g_path) {
      Disconnect(&p);
      Connect(&p);
    }
    g_ended = false;
  }
  return 0;
}
