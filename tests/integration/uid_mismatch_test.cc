// uid_mismatch: a server that drops to uid 65534 before creating its socket
// and a root client. The connection must work over kernel TCP, both ends
// name the reason uid_mismatch, and nothing created under /dev/shm for
// vsocket (watched with inotify while the processes run, then scanned) is
// readable or writable by another user. A root/root shm connection with a
// slow acceptor runs alongside as a control: its ring file lives long enough
// to be seen, which proves the watcher sees files at all.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "peer_harness.h"

namespace vsocket_test {
namespace {

constexpr uid_t kServerUid = 65534;

// What was seen of one /dev/shm entry: its mode and owner, if it still
// existed when looked at.
struct Seen {
  bool stat_ok = false;
  mode_t mode = 0;
  uid_t uid = 0;
};

// Watches /dev/shm and every /dev/shm/vsocket-* directory for new entries
// and stats each one as soon as the event is read.
class ShmWatcher {
 public:
  ShmWatcher() : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ < 0) return;
    Watch("/dev/shm");
    DIR* d = opendir("/dev/shm");
    while (dirent* e = d ? readdir(d) : nullptr) {
      std::string name = e->d_name;
      if (name.starts_with("vsocket-")) Watch("/dev/shm/" + name);
    }
    if (d) closedir(d);
  }
  ~ShmWatcher() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  void Drain() {
    alignas(inotify_event) char buf[16384];
    for (;;) {
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->len == 0 || !dirs_.count(ev->wd)) continue;
        const std::string dir = dirs_[ev->wd];
        const std::string name = ev->name;
        if (dir == "/dev/shm" && !name.starts_with("vsocket-")) continue;
        const std::string path = dir + "/" + name;
        Record(path);
        if (dir == "/dev/shm" && (ev->mask & IN_ISDIR)) Watch(path);
      }
    }
  }

  // Everything seen, plus whatever exists now under /dev/shm/vsocket-*.
  const std::map<std::string, Seen>& Entries() {
    Drain();
    DIR* d = opendir("/dev/shm");
    while (dirent* e = d ? readdir(d) : nullptr) {
      std::string name = e->d_name;
      if (!name.starts_with("vsocket-")) continue;
      const std::string dir = "/dev/shm/" + name;
      Record(dir);
      DIR* sub = opendir(dir.c_str());
      while (dirent* f = sub ? readdir(sub) : nullptr) {
        std::string fname = f->d_name;
        if (fname != "." && fname != "..") Record(dir + "/" + fname);
      }
      if (sub) closedir(sub);
    }
    if (d) closedir(d);
    return seen_;
  }

 private:
  void Watch(const std::string& dir) {
    int wd = inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MOVED_TO);
    if (wd >= 0) dirs_[wd] = dir;
  }
  void Record(const std::string& path) {
    struct stat st;
    Seen& s = seen_[path];
    if (!s.stat_ok && lstat(path.c_str(), &st) == 0) s = {true, st.st_mode, st.st_uid};
  }

  int fd_;
  std::map<int, std::string> dirs_;
  std::map<std::string, Seen> seen_;
};

TEST(UidMismatch, RootClientToNobodyServerFallsBackToTcpAndLeaksNoReadableFile) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the server as uid 65534";
  ShmWatcher watcher;
  ASSERT_TRUE(watcher.ok());

  Started server = StartServer(
      {.args = {"--setuid", std::to_string(kServerUid), "echo"}, .env = WithStats(Auto())});
  ASSERT_TRUE(server.child) << server.error;
  Started client = StartClient(
      {.args = {"roundtrip", "200", "8"}, .env = WithStats(Auto())}, server.port);
  ASSERT_TRUE(client.child) << client.error;
  Started control_server =
      StartServer({.args = {"--accept-delay-ms", "300", "echo"}, .env = Auto()});
  ASSERT_TRUE(control_server.child) << control_server.error;
  Started control_client =
      StartClient({.args = {"roundtrip", "5", "9"}, .env = Auto()}, control_server.port);
  ASSERT_TRUE(control_client.child) << control_client.error;
  // Watch while the connections live (the clients end them); at most 20 s.
  for (int i = 0; i < 20'000 && (client.child->Running() || control_client.child->Running());
       ++i) {
    watcher.Drain();
    usleep(1000);
  }
  PeerResult c = Finish(*client.child, 20s);
  PeerResult s = Finish(*server.child, 10s);
  PeerResult cc = Finish(*control_client.child, 10s);
  PeerResult cs = Finish(*control_server.child, 10s);
  ASSERT_TRUE(c.ok()) << c.Describe();
  ASSERT_TRUE(s.ok()) << s.Describe();
  ASSERT_TRUE(cc.ok()) << cc.Describe();
  ASSERT_TRUE(cs.ok()) << cs.Describe();
  EXPECT_TRUE(TookPath(cc, "shm", ""));

  EXPECT_EQ(s.One("conn").Int("uid"), static_cast<int64_t>(kServerUid));
  EXPECT_EQ(c.One("conn").Int("uid"), 0);
  EXPECT_EQ(c.One("roundtrip").Int("mismatches"), 0);
  EXPECT_EQ(c.One("roundtrip").Int("count"), 200);
  EXPECT_EQ(s.One("echoed").Int("bytes"), c.One("roundtrip").Int("bytes"));

  // The client offers a sealed segment (the accepting process decides);
  // the server, another user, declines it at once, and the client names
  // the same reason.
  EXPECT_EQ(c.One("done").Get("path"), "tcp") << c.Describe();
  EXPECT_EQ(c.One("done").Get("reason"), "uid_mismatch") << c.Describe();
  EXPECT_EQ(s.One("done").Get("reason"), "uid_mismatch") << s.Describe();
  EXPECT_EQ(s.One("conn").Get("path"), "tcp") << s.Describe();
  EXPECT_EQ(s.One("done").Get("path"), "tcp") << s.Describe();
  EXPECT_NE(s.One("conn").Get("reason"), "") << s.Describe();
  RecordProperty("server_reason", s.One("conn").Get("reason"));

  // No vsocket entry under /dev/shm grants any access to group or others,
  // and each lives in its owner's directory.
  int files_seen = 0;
  for (const auto& [path, seen] : watcher.Entries()) {
    if (!seen.stat_ok) continue;  // created and unlinked between event and stat
    files_seen += S_ISREG(seen.mode);
    // A symlink (a pool's offer name) is always 0777 on Linux and grants
    // nothing: its directory (0700) and its pool file (0600) do.
    if (!S_ISLNK(seen.mode)) {
      EXPECT_EQ(seen.mode & 077, 0u) << path << " has mode " << std::oct << (seen.mode & 07777);
    }
    const std::string top = path.substr(0, path.find('/', std::string("/dev/shm/").size()));
    EXPECT_EQ(top, ShmDir(seen.uid)) << path << " is owned by uid " << seen.uid;
  }
  EXPECT_GE(files_seen, 1) << "the watcher saw no ring file, not even the control's";
}

}  // namespace
}  // namespace vsocket_test
