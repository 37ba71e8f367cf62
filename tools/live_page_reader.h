// Reads the live statistics pages of vsocket processes
// (vsocket/live_stats_layout.h, docs/PROTOCOL.md section 9) without trusting
// them: a page that is short, of another version or inconsistent is
// skipped with a reason, a slot being rewritten is left out this round.
// Pages are read (pread, twice), never mapped, so one truncated meanwhile
// is a reason, not a SIGBUS.  Read-only: never writes a page; may unlink
// the page of a process that is gone.
// Used by vsocket-stat; no state, any thread.
#ifndef VSOCKET_TOOLS_LIVE_PAGE_READER_H_
#define VSOCKET_TOOLS_LIVE_PAGE_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vsocket_stat {

struct Traffic {
  uint64_t connections = 0;  // opened on this transport (totals only)
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

struct Connection {
  int fd = -1;
  std::string role;       // "client" or "server"
  std::string local;      // "127.0.0.1:5000", "[::1]:5000", "?"
  std::string peer;
  std::string transport;  // "shm", "tcp", ...
  std::string fallback_reason;  // "" on a fast path
  uint32_t rule_line = 0;       // 0: no rule decided it
  std::string state;      // "established", "shut_wr", "shut_rd", "shut_rdwr"
  double age_s = 0;
  uint64_t bytes_sent = 0;      // on every transport it used
  uint64_t bytes_received = 0;
  uint64_t ring_fill = 0;       // bytes sent, not yet consumed (rings only)
  uint64_t ring_bytes = 0;      // 0: no ring
};

struct Process {
  int pid = 0;
  std::string program;
  std::string rules_file;
  double age_s = 0;       // since its page was made (first connect/listen)
  std::map<std::string, Traffic> transports;  // closed and open connections
  std::map<std::string, uint64_t> fallback_reasons;
  uint64_t unlisted = 0;  // connections that found no slot
  std::vector<Connection> connections;  // open ones, by descriptor
};

// "stat-<pid>" in `dir`: reads the page into *out.  false with *why when it
// is not a readable, consistent page of a live process; *stale is then set
// when the file belongs to a process that is gone.
bool ReadPage(const std::string& path, Process* out, std::string* why, bool* stale);

// Every page in `dir` (UserDirectory()), by pid; `only_pid` > 0
// keeps that process alone.  Pages of processes that are gone are skipped
// and, with `remove_stale`, unlinked.
std::vector<Process> ReadPages(const std::string& dir, int only_pid, bool remove_stale);

// /dev/shm/vsocket-<euid>/live-<pidns>: the pages of this user's processes
// in our PID namespace (<pidns>: the inode of /proc/self/ns/pid in hex).
std::string UserDirectory();

}  // namespace vsocket_stat

#endif  // VSOCKET_TOOLS_LIVE_PAGE_READER_H_
