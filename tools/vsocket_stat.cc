// vsocket-stat: a live view of the vsocket processes of this user on this
// host (man/vsocket-stat.1.scd).  Reads each process's live statistics page
// (tools/live_page_reader.h); never writes one.
//
//   vsocket-stat [-p PID] [--json] [-w [SECONDS]] [-c COUNT]
//
// Exit status: 0; 1 when -p names no vsocket process; 2 on a usage error.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/live_page_reader.h"
#include "vsocket/fallback_advice.h"

namespace vsocket_stat {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Options {
  int pid = 0;
  bool json = false;
  bool watch = false;
  double interval_s = 1.0;
  long count = 0;  // refreshes in watch mode; 0: until a signal
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: vsocket-stat [-p PID] [--json] [-w [SECONDS]] [-c COUNT]\n"
               "  -p, --pid PID       only this process\n"
               "  -j, --json          one JSON object per refresh, on one line\n"
               "  -w, --watch [SECS]  refresh every SECS (default 1, 0.1..3600) until\n"
               "                      SIGINT/SIGTERM or COUNT refreshes\n"
               "  -c, --count COUNT   with -w: stop after COUNT refreshes\n"
               "  -h, --help\n");
}

bool ParseNumber(const char* text, double lo, double hi, double* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// 0: parsed; otherwise the exit status.
int ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    double v = 0;
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      std::exit(0);
    } else if (a == "-j" || a == "--json") {
      o->json = true;
    } else if (a == "-p" || a == "--pid") {
      if (i + 1 >= argc || !ParseNumber(argv[i + 1], 1, 1 << 22, &v)) {
        std::fprintf(stderr, "vsocket-stat: %s needs a process id\n", a.c_str());
        return 2;
      }
      o->pid = static_cast<int>(v);
      ++i;
    } else if (a == "-w" || a == "--watch") {
      o->watch = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') {
        if (!ParseNumber(argv[i + 1], 0.1, 3600, &v)) {
          std::fprintf(stderr, "vsocket-stat: -w takes seconds from 0.1 to 3600\n");
          return 2;
        }
        o->interval_s = v;
        ++i;
      }
    } else if (a == "-c" || a == "--count") {
      if (i + 1 >= argc || !ParseNumber(argv[i + 1], 1, 1e9, &v)) {
        std::fprintf(stderr, "vsocket-stat: -c needs a count from 1\n");
        return 2;
      }
      o->count = static_cast<long>(v);
      ++i;
    } else {
      std::fprintf(stderr, "vsocket-stat: unknown option %s\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  return 0;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Rule(const Process& p, const Connection& c) {
  if (c.rule_line == 0) return "";
  return p.rules_file + ":" + std::to_string(c.rule_line);
}

std::string Json(const std::vector<Process>& all) {
  std::string out = "{\"processes\":[";
  char buf[256];
  for (size_t i = 0; i < all.size(); ++i) {
    const Process& p = all[i];
    std::snprintf(buf, sizeof(buf), "%s{\"pid\":%d,\"program\":", i ? "," : "", p.pid);
    out += buf;
    out += JsonString(p.program) + ",\"rules_file\":" + JsonString(p.rules_file);
    std::snprintf(buf, sizeof(buf), ",\"age_s\":%.3f,\"unlisted\":%llu,\"transports\":{",
                  p.age_s, static_cast<unsigned long long>(p.unlisted));
    out += buf;
    bool first = true;
    for (const auto& [name, t] : p.transports) {
      std::snprintf(buf, sizeof(buf),
                    "%s%s:{\"connections\":%llu,\"bytes_sent\":%llu,\"bytes_received\":%llu}",
                    first ? "" : ",", JsonString(name).c_str(),
                    static_cast<unsigned long long>(t.connections),
                    static_cast<unsigned long long>(t.bytes_sent),
                    static_cast<unsigned long long>(t.bytes_received));
      out += buf;
      first = false;
    }
    out += "},\"fallback_reasons\":{";
    first = true;
    for (const auto& [name, n] : p.fallback_reasons) {
      out += (first ? "" : ",") + JsonString(name) + ":" + std::to_string(n);
      first = false;
    }
    out += "},\"connections\":[";
    for (size_t j = 0; j < p.connections.size(); ++j) {
      const Connection& c = p.connections[j];
      std::snprintf(buf, sizeof(buf), "%s{\"fd\":%d,\"role\":", j ? "," : "", c.fd);
      out += buf;
      out += JsonString(c.role) + ",\"local\":" + JsonString(c.local) +
             ",\"peer\":" + JsonString(c.peer) + ",\"transport\":" + JsonString(c.transport) +
             ",\"fallback_reason\":" + JsonString(c.fallback_reason) +
             ",\"rule\":" + JsonString(Rule(p, c)) + ",\"state\":" + JsonString(c.state);
      std::snprintf(buf, sizeof(buf),
                    ",\"age_s\":%.3f,\"bytes_sent\":%llu,\"bytes_received\":%llu,"
                    "\"ring_fill\":%llu,\"ring_bytes\":%llu}",
                    c.age_s, static_cast<unsigned long long>(c.bytes_sent),
                    static_cast<unsigned long long>(c.bytes_received),
                    static_cast<unsigned long long>(c.ring_fill),
                    static_cast<unsigned long long>(c.ring_bytes));
      out += buf;
    }
    out += "]}";
  }
  return out + "]}";
}

std::string Bytes(uint64_t n) {
  char buf[32];
  if (n < 10000) std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(n));
  else if (n < 10000ull << 10) std::snprintf(buf, sizeof(buf), "%.1fK", n / 1024.0);
  else if (n < 10000ull << 20) std::snprintf(buf, sizeof(buf), "%.1fM", n / 1048576.0);
  else std::snprintf(buf, sizeof(buf), "%.1fG", n / 1073741824.0);
  return buf;
}

std::string Text(const std::vector<Process>& all) {
  std::string out;
  char buf[512];
  if (all.empty()) return "no vsocket process of this user\n";
  for (const Process& p : all) {
    std::snprintf(buf, sizeof(buf), "PID %d %s  (up %.1fs)%s%s\n", p.pid,
                  p.program.c_str(), p.age_s, p.rules_file.empty() ? "" : "  rules ",
                  p.rules_file.c_str());
    out += buf;
    for (const auto& [name, t] : p.transports) {
      std::snprintf(buf, sizeof(buf), "  %-5s %llu connections, %s out, %s in\n", name.c_str(),
                    static_cast<unsigned long long>(t.connections), Bytes(t.bytes_sent).c_str(),
                    Bytes(t.bytes_received).c_str());
      out += buf;
    }
    if (!p.fallback_reasons.empty()) {
      out += "  fallback:";
      for (const auto& [name, n] : p.fallback_reasons) out += " " + name + "=" + std::to_string(n);
      out += "\n";
      for (const auto& [name, n] : p.fallback_reasons) {
        if (const char* advice = vsocket::FallbackReasonAdvice(name))
          out += "    " + name + ": " + advice + "\n";
      }
    }
    if (p.unlisted) out += "  (" + std::to_string(p.unlisted) + " connections not listed)\n";
    if (p.connections.empty()) continue;
    std::snprintf(buf, sizeof(buf), "  %5s %-6s %-22s %-22s %-5s %-11s %-8s %8s %8s %11s %s\n",
                  "FD", "ROLE", "LOCAL", "PEER", "VIA", "STATE", "AGE", "OUT", "IN", "RING",
                  "REASON/RULE");
    out += buf;
    for (const Connection& c : p.connections) {
      std::string ring = c.ring_bytes ? Bytes(c.ring_fill) + "/" + Bytes(c.ring_bytes) : "-";
      std::string why = c.fallback_reason;
      std::string rule = Rule(p, c);
      if (!rule.empty()) why += (why.empty() ? "" : " ") + std::string("rule ") + rule;
      char age[16];
      std::snprintf(age, sizeof(age), "%.1fs", c.age_s);
      std::snprintf(buf, sizeof(buf), "  %5d %-6s %-22s %-22s %-5s %-11s %-8s %8s %8s %11s %s\n",
                    c.fd, c.role.c_str(), c.local.c_str(), c.peer.c_str(), c.transport.c_str(),
                    c.state.c_str(), age, Bytes(c.bytes_sent).c_str(),
                    Bytes(c.bytes_received).c_str(), ring.c_str(), why.c_str());
      out += buf;
    }
  }
  return out;
}

// Sleeps `seconds` unless a signal asks to stop first.
void Pause(double seconds) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - ts.tv_sec) * 1e9);
  while (!g_stop && ::nanosleep(&ts, &ts) != 0) {
  }
}

int Main(int argc, char** argv) {
  Options o;
  if (int rc = ParseOptions(argc, argv, &o)) return rc;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;  // no SA_RESTART: nanosleep returns at once
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  bool clear = o.watch && !o.json && ::isatty(STDOUT_FILENO);
  const std::string dir = UserDirectory();
  for (long round = 1; !g_stop; ++round) {
    std::vector<Process> all = ReadPages(dir, o.pid, /*remove_stale=*/true);
    std::string text = o.json ? Json(all) + "\n" : Text(all);
    if (clear) text = "\033[H\033[J" + text;
    else if (o.watch && !o.json && round > 1) text = "\n" + text;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      return 0;  // the reader went away (a pipe closed)
    }
    if (!o.watch) return (o.pid > 0 && all.empty()) ? 1 : 0;
    if (o.count > 0 && round >= o.count) break;
    Pause(o.interval_s);
  }
  return 0;
}

}  // namespace
}  // namespace vsocket_stat

int main(int argc, char** argv) { return vsocket_stat::Main(argc, argv); }
