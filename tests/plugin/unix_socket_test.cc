// The one unix-socket serving helper (topology/common/unix_socket.h) that
// the device plugin framework, the DRA framework and the host share: the
// socket appears only once it accepts, with its mode already set; what is
// at the path already is replaced only when it is a stale socket; the file
// goes at the end only while it is still ours.
#include "topology/common/unix_socket.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "wait_for.h"

namespace topology::common {
namespace {

using ::testing::HasSubstr;

// A server with no port of its own (the acceptor hands it connections)
// answering every method UNIMPLEMENTED.
class EmptyServer {
 public:
  EmptyServer() {
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&unimplemented_);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
  }
  ~EmptyServer() { server_->Shutdown(); }
  grpc::Server* get() const { return server_.get(); }

 private:
  grpc::CallbackGenericService unimplemented_;
  std::unique_ptr<grpc::Server> server_;
};

// A socket bound at `path` and left there, listening or not (a killed
// process's, or another instance's).
int BindAt(const std::filesystem::path& path, bool listening) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      (listening && listen(fd, 4) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

// What a watcher of the directory (the kubelet's plugin watcher, a plugin
// waiting for kubelet.sock) sees at the moment the socket's name appears:
// whether a connection succeeds then, and the file's mode.
struct FirstSight {
  bool seen = false;
  // The name appeared at once, set up (a rename), not as a bind's new
  // inode being set up under it.
  bool whole = false;
  bool connected = false;
  mode_t mode = 0;
  // Every name created in the directory until then, this one included.
  std::vector<std::string> names;
};

FirstSight WatchAppear(const std::filesystem::path& path, int inotify) {
  FirstSight sight;
  std::array<char, 4096> buffer{};
  pollfd fd{inotify, POLLIN, 0};
  while (!sight.seen && poll(&fd, 1, 2000) > 0) {
    const ssize_t n = read(inotify, buffer.data(), buffer.size());
    for (size_t i = 0; n > 0 && i < static_cast<size_t>(n);) {
      const auto* event = reinterpret_cast<const inotify_event*>(&buffer[i]);
      if (event->len > 0) sight.names.emplace_back(event->name);
      if (event->len > 0 && path.filename() == event->name) {
        sight.seen = true;
        sight.whole = (event->mask & IN_MOVED_TO) != 0;
        sight.connected = Listening(path);
        struct stat info {};
        if (lstat(path.c_str(), &info) == 0) sight.mode = info.st_mode & 0777;
      }
      i += sizeof(inotify_event) + event->len;
    }
  }
  return sight;
}

// Starts an acceptor at `path` while a watcher of its directory looks
// from its own thread, as a client woken by the new name would: what it
// saw. `acceptor` gets the acceptor (null, the test failed, when it did
// not start).
FirstSight StartWatched(const std::filesystem::path& path, grpc::Server* server,
                        const UnixSocketOptions& options,
                        std::unique_ptr<UnixAcceptor>* acceptor) {
  const int inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify < 0 || inotify_add_watch(inotify, path.parent_path().c_str(),
                                       IN_CREATE | IN_MOVED_TO) < 0) {
    ADD_FAILURE() << "inotify: " << std::strerror(errno);
    if (inotify >= 0) close(inotify);
    return {};
  }
  std::future<FirstSight> watched = std::async(
      std::launch::async, [&] { return WatchAppear(path, inotify); });
  auto started = UnixAcceptor::Start(path, server, options);
  const FirstSight sight = watched.get();
  close(inotify);
  if (!started.ok()) {
    ADD_FAILURE() << started.status().ToString();
    return sight;
  }
  *acceptor = std::move(*started);
  return sight;
}

// Fails with the old bind-then-listen order: the name appeared (inotify's
// IN_CREATE at bind) before the socket accepted or had its mode; a client
// woken by it could be refused. The watcher looks from its own thread, as
// such a client would, while the acceptor starts.
TEST(UnixAcceptorTest, TheSocketAppearsOnlyOnceItAcceptsWithItsMode) {
  testing::TempDir dir;
  const auto path = dir.path() / "kubelet.sock";
  EmptyServer server;
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<UnixAcceptor> acceptor;
    const FirstSight sight =
        StartWatched(path, server.get(), {.mode = 0600}, &acceptor);
    ASSERT_NE(acceptor, nullptr);
    EXPECT_TRUE(sight.seen);
    EXPECT_TRUE(sight.whole) << "round " << round;
    EXPECT_TRUE(sight.connected) << "round " << round;
    EXPECT_EQ(sight.mode, 0600u) << "round " << round;
    acceptor.reset();
    EXPECT_FALSE(IsSocket(path));
  }
}

// In place (the kubelet's plugin registry, whose watcher stats every name
// that appears and logs an error for one already gone): the only name that
// ever appears in the directory is the socket's own, and it has its mode
// from the start, whatever the umask (the mode is the unbound socket's).
// Failed before in_place: the real kubelet logged "stat file
// .<name>.tmp failed" at each registration.
TEST(UnixAcceptorTest, InPlaceOnlyItsNameAppearsWithItsMode) {
  testing::TempDir dir;
  const auto path = dir.path() / "driver-reg.sock";
  EmptyServer server;
  const mode_t umask_was = umask(0);
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<UnixAcceptor> acceptor;
    const FirstSight sight = StartWatched(
        path, server.get(), {.mode = 0600, .in_place = true}, &acceptor);
    ASSERT_NE(acceptor, nullptr);
    EXPECT_TRUE(sight.seen);
    EXPECT_EQ(sight.mode, 0600u) << "round " << round;
    EXPECT_THAT(sight.names, ::testing::Each(std::string("driver-reg.sock")))
        << "round " << round;
    EXPECT_TRUE(Listening(path));
    acceptor.reset();
    EXPECT_FALSE(IsSocket(path));
  }
  umask(umask_was);
}

// A socket unlinked and bound again at its path is another socket, though
// ext4 gives it the inode number of the one it replaced (the kubelet's pod
// resources socket at a restart): its identity holds its birth time too.
// The second is made once the file system's clock has moved (a file made
// and removed there is born later than the first socket), as a restart is:
// files made within one of its ticks have the same birth time.
TEST(SocketIdentityTest, ASocketBoundAgainAtItsPathIsAnotherOne) {
  testing::TempDir dir;
  const auto path = dir.path() / "kubelet.sock";
  const int first = BindAt(path, /*listening=*/true);
  ASSERT_GE(first, 0);
  const auto before = SocketAt(path);
  ASSERT_TRUE(before.has_value());
  close(first);
  ASSERT_EQ(unlink(path.c_str()), 0);
  const auto probe = dir.path() / "probe";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const int fd = open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd >= 0) close(fd);
        const auto made = files::IdentityAt(probe);
        unlink(probe.c_str());
        return made && made->birth_ns != before->birth_ns;
      },
      std::chrono::seconds(2), std::chrono::milliseconds(1)));
  const int second = BindAt(path, /*listening=*/true);
  ASSERT_GE(second, 0);
  const auto after = SocketAt(path);
  ASSERT_TRUE(after.has_value());
  EXPECT_NE(after, before) << "inode " << after->ino << " both times";
  close(second);
}

TEST(UnixAcceptorTest, AStaleSocketIsReplacedALiveOneAndOtherFilesAreNot) {
  testing::TempDir dir;
  EmptyServer server;
  const auto path = dir.path() / "plugin.sock";

  // A killed process's socket: nobody listens; replaced.
  const int stale = BindAt(path, /*listening=*/false);
  ASSERT_GE(stale, 0);
  close(stale);
  const auto before = SocketAt(path);
  auto acceptor = UnixAcceptor::Start(path, server.get(), {});
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().ToString();
  EXPECT_NE(SocketAt(path), before);
  EXPECT_EQ(SocketAt(path), (*acceptor)->identity());
  EXPECT_TRUE(Listening(path));
  acceptor->reset();

  // Another live server: refused, its socket untouched.
  const int live = BindAt(path, /*listening=*/true);
  ASSERT_GE(live, 0);
  const auto theirs = SocketAt(path);
  auto refused = UnixAcceptor::Start(path, server.get(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(path.string()));
  EXPECT_THAT(refused.status().message(), HasSubstr("another process"));
  EXPECT_EQ(SocketAt(path), theirs);
  close(live);
  std::filesystem::remove(path);

  // A regular file: refused, kept.
  std::ofstream(path) << "data";
  auto file = UnixAcceptor::Start(path, server.get(), {});
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("other than a socket"));
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
}

TEST(UnixAcceptorTest, OnlyItsOwnSocketIsRemovedAtTheEnd) {
  testing::TempDir dir;
  EmptyServer server;
  const auto path = dir.path() / "dra.sock";
  auto acceptor = UnixAcceptor::Start(path, server.get(), {});
  ASSERT_TRUE(acceptor.ok());
  // Someone removed ours and serves their own at the path.
  std::filesystem::remove(path);
  const int theirs = BindAt(path, /*listening=*/true);
  ASSERT_GE(theirs, 0);
  const auto identity = SocketAt(path);
  acceptor->reset();
  EXPECT_EQ(SocketAt(path), identity);
  close(theirs);
}

TEST(UnixAcceptorTest, ACrashLeftoverOfTheHiddenNameIsRemoved) {
  testing::TempDir dir;
  EmptyServer server;
  const auto path = dir.path() / "control.sock";
  const auto hidden = dir.path() / ".control.sock.tmp";
  const int leftover = BindAt(hidden, /*listening=*/false);
  ASSERT_GE(leftover, 0);
  close(leftover);
  auto acceptor = UnixAcceptor::Start(path, server.get(), {.mode = 0660});
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().ToString();
  EXPECT_FALSE(
      std::filesystem::exists(std::filesystem::symlink_status(hidden)));
  struct stat info {};
  ASSERT_EQ(lstat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0660u);
  acceptor->reset();
}

TEST(UnixAcceptorTest, APathTooLongIsNamed) {
  testing::TempDir dir;
  EmptyServer server;
  const auto path = dir.path() / (std::string(120, 'x') + ".sock");
  auto acceptor = UnixAcceptor::Start(path, server.get(), {});
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("longer than"));
}

// Every connection holding a call (unread streams, a flood of them): a
// newcomer (the kubelet dialling) is never refused. The connection closed
// for it is the newest of the peer holding the most; the oldest, the
// kubelet's long-held one, stays.
TEST(UnixAcceptorTest, ANewcomerIsNeverRefusedWhenEveryConnectionIsBusy) {
  testing::TempDir dir;
  EmptyServer server;
  const auto path = dir.path() / "busy.sock";
  auto calls = std::make_shared<ConnectionCalls>();
  // Every descriptor the acceptor can hand over counts as holding a call.
  std::vector<std::unique_ptr<ConnectionCalls::Call>> held;
  for (int fd = 0; fd < 1024; ++fd) {
    held.push_back(std::make_unique<ConnectionCalls::Call>(
        calls.get(), "fd:" + std::to_string(fd)));
  }
  auto acceptor = UnixAcceptor::Start(path, server.get(),
                                      {.max_connections = 4, .calls = calls});
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().ToString();
  const auto dial = [&] {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  };
  // Whether the server shut the connection: its hang-up, after whatever
  // it sent first (HTTP/2 settings).
  const auto hung_up = [](int fd, int timeout_ms) {
    pollfd p{fd, POLLRDHUP, 0};
    return poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLRDHUP) != 0;
  };
  // Handed over in the order they arrive (the listen backlog's).
  std::vector<int> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(dial());
  ASSERT_TRUE(testing::WaitFor([&] { return (*acceptor)->cut() == 1; }));
  EXPECT_EQ((*acceptor)->refused(), 0u);
  EXPECT_EQ((*acceptor)->evicted(), 0u);
  // The newest before the newcomer was closed for it ...
  EXPECT_TRUE(hung_up(clients[3], 5000));
  // ... and the others, the oldest first among them, are served still.
  for (int i : {0, 1, 2, 4}) {
    EXPECT_FALSE(hung_up(clients[static_cast<size_t>(i)], 0)) << i;
  }
  for (int fd : clients) close(fd);
  held.clear();
}

}  // namespace
}  // namespace topology::common
