// DriverSockets: the DRA runner's two sockets served, watched and served
// again (driver_sockets.h).
#include "driver_sockets.h"

#include <utility>

#include <glog/logging.h>

namespace topology::draplugin {

using common::Listening;
using common::SocketAt;

namespace {

// Connections open at once on one socket (the kubelet holds one or two); a
// new one beyond it closes another (unix_socket.h: idle first, of the peer
// holding the most, its newest), never the newcomer.
constexpr size_t kMaxConnections = 64;

}  // namespace

DriverSockets::DriverSockets(Options options,
                             std::vector<grpc::Service*> dra_services,
                             grpc::Service* registration_service,
                             std::function<void()> on_new_registration)
    : options_(std::move(options)),
      dra_services_(std::move(dra_services)),
      registration_service_(registration_service),
      on_new_registration_(std::move(on_new_registration)) {}

DriverSockets::~DriverSockets() {
  StopWatching();
  StopAccepting();
  Shutdown(std::chrono::system_clock::now());
}

Status DriverSockets::Start() {
  if (Status served = ServeDra(); !served.ok()) return served;
  if (Status served = ServeRegistration(); !served.ok()) return served;
  WatchSocketDirectories();
  watcher_ = std::thread([this] { WatchSockets(); });
  return OkStatus();
}

void DriverSockets::StopWatching() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  // (Their callbacks take mu_: not held here.)
  directory_watchers_.clear();
  if (watcher_.joinable()) watcher_.join();
}

void DriverSockets::StopAccepting() {
  MutexLock servers(server_mu_);
  // Each socket goes only while it is still this runner's (a newer
  // instance's stays).
  if (registration_served_) registration_served_->StopAccepting();
  if (dra_served_) dra_served_->StopAccepting();
}

void DriverSockets::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::unique_ptr<common::ServedSocket> registration;
  std::unique_ptr<common::ServedSocket> dra;
  {
    MutexLock servers(server_mu_);
    registration = std::move(registration_served_);
    dra = std::move(dra_served_);
  }
  if (registration) registration->Shutdown(deadline);
  if (dra) dra->Shutdown(deadline);
}

StatusOr<std::unique_ptr<common::ServedSocket>> DriverSockets::ServeAt(
    const std::filesystem::path& path, std::vector<grpc::Service*> services,
    bool in_place) const {
  // Another instance's socket is never replaced: two drivers on one node
  // would take the kubelet's registration from each other.
  if (SocketAt(path) && Listening(path)) {
    return FailedPreconditionError(
        "another process serves " + path.string() +
        "; two instances on one node need their own sockets (give each "
        "its pod UID: --pod-uid, from the downward API)");
  }
  return common::ServedSocket::Serve(
      {.path = path,
       .services = std::move(services),
       .socket = {.mode = 0600,
                  .max_connections = kMaxConnections,
                  .in_place = in_place},
       .max_receive_bytes = 16 << 20});
}

Status DriverSockets::ServeDra() {
  // The old server (its socket is gone) first: a socket path has one
  // listener.
  std::unique_ptr<common::ServedSocket> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(dra_served_);
  }
  old.reset();
  auto served = ServeAt(options_.dra_socket, dra_services_, /*in_place=*/false);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  dra_served_ = std::move(*served);
  return OkStatus();
}

Status DriverSockets::ServeRegistration() {
  std::unique_ptr<common::ServedSocket> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(registration_served_);
  }
  old.reset();
  // A new socket is a new registration: the kubelet's watcher calls
  // GetInfo again.
  if (on_new_registration_) on_new_registration_();
  // The kubelet's plugin watcher stats every name that appears in the
  // registry: the socket is bound at its own name there.
  auto served = ServeAt(options_.registration_socket, {registration_service_},
                        /*in_place=*/true);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  registration_served_ = std::move(*served);
  return OkStatus();
}

void DriverSockets::WatchSocketDirectories() {
  // The kubelet's plugin watcher finds sockets through fsnotify; a socket
  // it (or anyone) removes is noticed here the same way, and served again
  // at once rather than at the next look.
  std::vector<std::pair<std::filesystem::path, std::string>> watched = {
      {options_.dra_socket.parent_path(),
       options_.dra_socket.filename().string()},
      {options_.registration_socket.parent_path(),
       options_.registration_socket.filename().string()}};
  if (watched[0].first == watched[1].first) {
    watched.pop_back();
    watched[0].second.clear();  // both names
  }
  for (const auto& [dir, name] : watched) {
    auto watcher =
        common::DirWatcher::Start(dir, [this](const common::DirEvent& event) {
          if (event.kind == common::DirEvent::Kind::kCreated) return;
          bool look = event.kind == common::DirEvent::Kind::kListed;
          {
            MutexLock servers(server_mu_);
            for (const auto* served : {&dra_served_, &registration_served_}) {
              const std::filesystem::path& path =
                  served == &dra_served_ ? options_.dra_socket
                                         : options_.registration_socket;
              if (event.name != path.filename().string()) continue;
              // Gone, or never served (serving failed): looked at now.
              look = !*served || (*served)->MayHaveGone(event);
            }
          }
          if (!look) return;
          {
            MutexLock lock(mu_);
            look_now_ = true;
          }
          changed_.notify_all();
        });
    if (!watcher.ok()) {
      // Looked at every socket_check all the same.
      LOG(WARNING) << options_.driver_name << ": " << watcher.status().message()
                   << "; its sockets are looked at every "
                   << options_.socket_check.count() << " ms only";
      continue;
    }
    directory_watchers_.push_back(std::move(*watcher));
  }
}

void DriverSockets::WatchSockets() {
  const Clock& clock = *options_.clock;
  MutexLock lock(mu_);
  while (!stopping_) {
    const Clock::TimePoint next = clock.Now() + options_.socket_check;
    while (!stopping_ && !look_now_ && clock.Now() < next) {
      clock.WaitUntil(changed_, lock, next);
    }
    look_now_ = false;
    if (stopping_) break;
    lock.unlock();
    // Served again when the socket is gone, or when serving it failed
    // before (its directory missing for a moment): retried at every look.
    // A socket another process put at the path is left alone.
    bool dra_gone = false;
    bool registration_gone = false;
    {
      MutexLock servers(server_mu_);
      using Look = common::ServedSocket::Look;
      // Gone: nothing listens at the path; never served: nothing there yet
      // either (another process's socket is not ours to replace).
      const auto look = [](const std::unique_ptr<common::ServedSocket>& served,
                           const std::filesystem::path& path) {
        if (served) return served->LookAtPath();
        return SocketAt(path) && Listening(path) ? Look::kTaken : Look::kGone;
      };
      const Look dra = look(dra_served_, options_.dra_socket);
      const Look registration =
          look(registration_served_, options_.registration_socket);
      dra_gone = dra == Look::kGone;
      registration_gone = registration == Look::kGone;
      const bool taken = (dra_served_ && dra == Look::kTaken) ||
                         (registration_served_ && registration == Look::kTaken);
      if (taken && !taken_warned_) {
        taken_warned_ = true;
        LOG(ERROR) << options_.driver_name
                   << ": another process replaced this driver's socket; it "
                      "is left alone (run each instance with its pod UID)";
      }
    }
    // The DRA socket first: registration names it. While it cannot be
    // served, registering again would only name a socket nobody serves
    // (and make a watched directory's events, and a look, at every try).
    bool dra_served = false;
    if (dra_gone) {
      LOG(WARNING) << options_.driver_name << ": "
                   << options_.dra_socket.string()
                   << " was removed; serving it again";
      if (Status served = ServeDra(); !served.ok()) {
        LOG(ERROR) << served.message();
      } else {
        dra_served = true;
      }
    }
    if (registration_gone || dra_served) {
      LOG(WARNING) << options_.driver_name << ": "
                   << options_.registration_socket.string()
                   << (registration_gone ? " was removed" : "")
                   << "; registering again";
      if (Status served = ServeRegistration(); !served.ok()) {
        LOG(ERROR) << served.message();
      }
    }
    lock.lock();
  }
}

}  // namespace topology::draplugin
