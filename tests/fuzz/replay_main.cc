// A main() for a libFuzzer target when libFuzzer is not there (gcc, or the
// default build): runs every file of the given corpus directories (or
// files), then deterministic pseudo-random mutations of them, so that the
// ordinary test run exercises every fuzz target.
//
//   <target>_replay [--mutations N] [--seconds S] [--seed X] <dir|file>...
//
// Stops after N mutations (default 4000) or S seconds (default 2), whichever
// comes first; the same seed gives the same inputs.  Exit 0 if every input
// returned (a bug aborts: assert, ASan/UBSan in a sanitized build); 1 on a
// usage error or an empty corpus.
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Input = std::vector<uint8_t>;
constexpr size_t kMaxInput = 4096;

bool ReadFile(const std::string& path, Input* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (out->size() > kMaxInput) out->resize(kMaxInput);
  return true;
}

void Collect(const std::string& path, std::vector<Input>* corpus) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    Input input;
    if (ReadFile(path, &input)) corpus->push_back(std::move(input));
    return;
  }
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(path.c_str())) {
    while (struct dirent* e = ::readdir(dir)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());  // readdir order is not stable
  for (const std::string& name : names) Collect(path + "/" + name, corpus);
}

// splitmix64: small, seedable, the same everywhere.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

// Values that sit on the edges of what the parsers check.
constexpr uint64_t kInteresting[] = {
    0, 1, 0x7f, 0x80, 0xff, 0xffff, 4095, 4096, 4097, 1ull << 20, 1ull << 30,
    (1ull << 30) + 1, 1ull << 31, 0xffffffffull, 1ull << 32, 1ull << 63,
    ~0ull, ~0ull - 4095};

void Mutate(Rng* rng, Input* in) {
  int steps = 1 + static_cast<int>(rng->Below(4));
  for (int i = 0; i < steps; ++i) {
    size_t pos = rng->Below(in->size() + 1);
    switch (rng->Below(7)) {
      case 0:  // flip a bit
        if (!in->empty()) (*in)[rng->Below(in->size())] ^= uint8_t(1u << rng->Below(8));
        break;
      case 1:  // a random byte
        if (!in->empty()) (*in)[rng->Below(in->size())] = uint8_t(rng->Next());
        break;
      case 2:  // insert a byte (often a separator the text parsers split on)
        if (in->size() < kMaxInput) {
          static const char kText[] = ";,+-0123456789kKmMgG \t";
          uint8_t b = rng->Below(2) ? uint8_t(kText[rng->Below(sizeof(kText) - 1)])
                                    : uint8_t(rng->Next());
          in->insert(in->begin() + static_cast<long>(pos), b);
        }
        break;
      case 3:  // erase a range
        if (pos < in->size()) {
          size_t n = std::min(in->size() - pos, 1 + rng->Below(8));
          in->erase(in->begin() + static_cast<long>(pos),
                    in->begin() + static_cast<long>(pos + n));
        }
        break;
      case 4:  // an interesting little-endian word of 1, 2, 4 or 8 bytes
        if (!in->empty()) {
          uint64_t v = kInteresting[rng->Below(std::size(kInteresting))];
          if (rng->Below(2)) v += rng->Below(3) - 1;
          size_t width = size_t{1} << rng->Below(4);
          size_t at = rng->Below(in->size());
          for (size_t b = 0; b < width && at + b < in->size(); ++b)
            (*in)[at + b] = uint8_t(v >> (8 * b));
        }
        break;
      case 5:  // duplicate a chunk
        if (!in->empty() && in->size() < kMaxInput) {
          size_t from = rng->Below(in->size());
          size_t n = std::min({in->size() - from, 1 + rng->Below(32),
                               kMaxInput - in->size()});
          Input chunk(in->begin() + static_cast<long>(from),
                      in->begin() + static_cast<long>(from + n));
          in->insert(in->begin() + static_cast<long>(pos), chunk.begin(), chunk.end());
        }
        break;
      case 6:  // truncate
        in->resize(pos);
        break;
    }
  }
}

double NowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 4000;
  double seconds = 2.0;
  uint64_t seed = 14;
  std::vector<Input> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::atol(argv[++i]);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 0);
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--mutations N] [--seconds S] [--seed X] "
                           "<corpus dir|file>...\n", argv[0]);
      return 1;
    } else {
      Collect(arg, &corpus);
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: no corpus inputs\n", argv[0]);
    return 1;
  }
  for (const Input& input : corpus) LLVMFuzzerTestOneInput(input.data(), input.size());
  LLVMFuzzerTestOneInput(nullptr, 0);
  Rng rng{seed};
  double deadline = NowSeconds() + seconds;
  long done = 0;
  for (; done < mutations; ++done) {
    if ((done & 63) == 0 && NowSeconds() > deadline) break;
    Input input = corpus[rng.Below(corpus.size())];
    Mutate(&rng, &input);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("%zu corpus inputs, %ld mutations (seed %llu): all returned\n",
              corpus.size(), done, static_cast<unsigned long long>(seed));
  return 0;
}
