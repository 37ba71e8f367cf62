// vsocket-run: runs a program with libvsocket_preload.so preloaded.
//
//   vsocket-run [--transport auto|<transport>|tcp] [--spin-us N] [--ring-size S]
//               [--claim-timeout-ms N] [--stats] [--log LEVEL] [--]
//               program [args...]
//
// Finds libvsocket_preload.so next to itself, in ../lib or in the install tree's
// library directory (../lib/<multiarch> on Debian), puts it first in
// LD_PRELOAD (keeping what was there), sets the VSOCKET_* variables for the
// options given and execs the program (searched in PATH).  Options may also
// be written --name=value.  Exit status: the program's, or 127 when it could
// not be run (126 when it exists but could not be executed), 2 for usage
// errors.  Plain C++ and libc only; it is not itself preloaded.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace {

constexpr char kLibrary[] = "libvsocket_preload.so";

// "auto", each transport the build declares (VSOCKET_RUN_TRANSPORTS, from
// the backends' CMake declarations) and "tcp", in that order.
std::vector<std::string> Transports() {
  std::vector<std::string> names = {"auto"};
  std::string list = VSOCKET_RUN_TRANSPORTS;
  for (size_t start = 0; start < list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) names.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  names.push_back("tcp");
  return names;
}

// The names joined: "a|b|c" for " | ", "a, b or c" for ", ".
std::string TransportChoices(const char* style) {
  std::vector<std::string> names = Transports();
  bool prose = style[0] == ',';
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += !prose ? "|" : i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

void Usage(FILE* out) {
  fprintf(out,
          "usage: vsocket-run [options] [--] program [args...]\n"
          "Runs program with the vsocket LD_PRELOAD interposer.\n"
          "  --transport %s  path policy (VSOCKET_TRANSPORT)\n"
          "  --spin-us N               busy-poll budget in microseconds (VSOCKET_SPIN_US)\n"
          "  --ring-size S             ring bytes per direction, e.g. 1M (VSOCKET_RING_SIZE)\n"
          "  --claim-timeout-ms N      unclaimed-offer timeout (VSOCKET_CLAIM_TIMEOUT_MS)\n"
          "  --stats                   print the statistics JSON line at exit (VSOCKET_STATS=1)\n"
          "  --log LEVEL               error|warn|info|debug (VSOCKET_LOG)\n"
          "  --library PATH            use this libvsocket_preload.so\n"
          "  -h, --help                this text\n",
          TransportChoices("|").c_str());
}

[[noreturn]] void Die(const char* fmt, const char* arg) {
  fprintf(stderr, "vsocket-run: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(2);
}

bool Readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// The directory of this executable (no trailing slash), "" if unknown.
std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  char* slash = strrchr(buf, '/');
  if (!slash) return "";
  *slash = '\0';
  return buf;
}

std::string FindLibrary() {
  std::string dir = SelfDir();
  if (dir.empty()) return "";
#ifndef VSOCKET_RUN_LIBDIR
#define VSOCKET_RUN_LIBDIR "lib"
#endif
  for (const char* rel : {"/", "/../lib/", "/../" VSOCKET_RUN_LIBDIR "/"}) {
    std::string candidate = dir + rel + kLibrary;
    if (Readable(candidate)) {
      char resolved[PATH_MAX];
      if (realpath(candidate.c_str(), resolved)) return resolved;
      return candidate;
    }
  }
  return "";
}

bool IsUnsigned(const char* s) {
  if (!*s) return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
  }
  return true;
}

bool OneOf(const char* s, std::initializer_list<const char*> options) {
  for (const char* o : options) {
    if (!strcmp(s, o)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      Usage(stdout);
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    std::string name = arg, value;
    bool has_value = false;
    size_t eq = arg.find('=');
    if (arg.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    auto need_value = [&]() -> const char* {
      if (has_value) return value.c_str();
      if (i + 1 >= argc) Die("%s needs a value", name.c_str());
      return argv[++i];
    };
    if (name == "--stats") {
      setenv("VSOCKET_STATS", "1", 1);
    } else if (name == "--transport") {
      const char* v = need_value();
      bool known = false;
      for (const std::string& t : Transports()) known |= t == v;
      if (!known)
        Die(("--transport must be " + TransportChoices(", ") + ", not '%s'").c_str(), v);
      setenv("VSOCKET_TRANSPORT", v, 1);
    } else if (name == "--spin-us") {
      const char* v = need_value();
      if (!IsUnsigned(v)) Die("--spin-us needs a number of microseconds, not '%s'", v);
      setenv("VSOCKET_SPIN_US", v, 1);
    } else if (name == "--ring-size") {
      setenv("VSOCKET_RING_SIZE", need_value(), 1);  // the library validates
    } else if (name == "--claim-timeout-ms") {
      const char* v = need_value();
      if (!IsUnsigned(v)) Die("--claim-timeout-ms needs a number, not '%s'", v);
      setenv("VSOCKET_CLAIM_TIMEOUT_MS", v, 1);
    } else if (name == "--log") {
      const char* v = need_value();
      if (!OneOf(v, {"error", "warn", "info", "debug"}))
        Die("--log must be error, warn, info or debug, not '%s'", v);
      setenv("VSOCKET_LOG", v, 1);
    } else if (name == "--library") {
      library = need_value();
    } else {
      fprintf(stderr, "vsocket-run: unknown option %s\n", arg.c_str());
      Usage(stderr);
      return 2;
    }
  }
  if (i >= argc) {
    Usage(stderr);
    return 2;
  }
  if (library.empty()) library = FindLibrary();
  if (library.empty() || !Readable(library)) {
    fprintf(stderr,
            "vsocket-run: cannot find %s next to %s, in ../lib or in ../%s\n",
            kLibrary, argv[0], VSOCKET_RUN_LIBDIR);
    return 127;
  }
  std::string preload = library;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) {
    preload += ":";
    preload += old;
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  execvp(argv[i], argv + i);
  int err = errno;
  fprintf(stderr, "vsocket-run: %s: %s\n", argv[i], strerror(err));
  return err == ENOENT ? 127 : 126;
}
