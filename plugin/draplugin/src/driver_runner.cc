#include "driver_runner_impl.h"
#include "text_util.h"

namespace topology::draplugin {

std::vector<std::string> ServedVersions(bool serve_health) {
  std::vector<std::string> versions = {kDraV1, kDraV1beta1};
  if (serve_health) {
    versions.emplace_back(kHealthV1);
    versions.emplace_back(kHealthV1alpha1);
  }
  return versions;
}

// --- start and stop ----------------------------------------------------------

Status DriverRunner::Impl::Start() {
  {
    MutexLock lock(mu_);
    if (started_) return FailedPreconditionError("already started");
    started_ = true;
  }
  for (const auto& dir :
       {options_.registry_dir, options_.plugin_dir, options_.state_dir}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error || !std::filesystem::is_directory(dir)) {
      return FailedPreconditionError("cannot create the directory " +
                                     dir.string() +
                                     (error ? ": " + error.message() : ""));
    }
  }
  if (chmod(options_.plugin_dir.c_str(), 0750) != 0) {
    return FailedPreconditionError("cannot set the mode of " +
                                   options_.plugin_dir.string());
  }
  for (const auto& [what, dir] :
       {std::pair<const char*, const std::filesystem::path*>{
            "registry directory", &options_.registry_dir},
        {"plugin directory", &options_.plugin_dir},
        {"state directory", &options_.state_dir},
        {"CDI directory", &options_.cdi_dir}}) {
    if (Status direct = files::RefuseLinkedDirectory(what, *dir);
        !direct.ok()) {
      return direct;
    }
  }
  if (!options_.pod_uid.empty()) {
    auto opened = InstanceLock::Open(options_.plugin_dir / kSerializeLock,
                                     options_.clock);
    if (!opened.ok()) return opened.status();
    instances_ = std::move(*opened);
  }
  if (const size_t removed = files::RemoveTemporaryLeftovers(checkpoint_);
      removed > 0) {
    LOG(INFO) << options_.driver_name << ": removed " << removed
              << " temporary file(s) an interrupted write left beside "
              << checkpoint_.string();
  }
  if (Status loaded = claims_.Reload(); loaded.ok()) {
    LOG(INFO) << options_.driver_name << ": " << claims_.size()
              << " prepared claim(s) restored from " << checkpoint_.string();
  } else if (loaded.code() != StatusCode::kNotFound) {
    // Kept aside for a human; the claims it held are unprepared by UID
    // when the kubelet asks (DriverHandler::Unprepare with no devices).
    const std::filesystem::path aside = checkpoint_.string() + ".damaged";
    auto text = files::ReadRegularFile(checkpoint_, size_t{64} << 20);
    if (text.ok()) (void)files::WriteFileAtomically(aside, *text, 0600);
    LOG(ERROR) << loaded.message() << "; starting without it"
               << (text.ok() ? " (a copy is at " + aside.string() + ")" : "");
  }
  // The state directory can hold the checkpoint: found now, not at the
  // first Prepare.
  if (Status saved = claims_.Save(); !saved.ok()) {
    return FailedPreconditionError(
        "the state directory " + options_.state_dir.string() +
        " cannot hold the claim checkpoint: " + saved.message());
  }
  if (Status cleaned = RemoveUnpreparedSpecs(); !cleaned.ok()) {
    return cleaned;
  }
  if (Status served = ServeDra(); !served.ok()) return served;
  if (Status served = ServeRegistration(); !served.ok()) {
    Stop();
    return served;
  }
  WatchSocketDirectories();
  watcher_ = std::thread([this] { WatchSockets(); });
  LOG(INFO) << options_.driver_name << ": serving " << dra_socket_.string()
            << ", registration at " << registration_socket_.string();
  return OkStatus();
}

void DriverRunner::Impl::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  // A call waiting for the instances' lock sees the stop at once.
  if (instances_) instances_->Interrupt();
  // No claim's turn is had from now on; the health streams end at once.
  claims_.Stop();
  health_.Stop();
  // (Their callbacks take mu_: not held here.)
  directory_watchers_.clear();
  if (watcher_.joinable()) watcher_.join();
  std::unique_ptr<plugin::ServedSocket> registration;
  std::unique_ptr<plugin::ServedSocket> dra;
  {
    MutexLock servers(server_mu_);
    registration = std::move(registration_served_);
    dra = std::move(dra_served_);
  }
  // No new connection; each socket goes only while it is still this
  // runner's (a newer instance's stays).
  if (registration) registration->StopAccepting();
  if (dra) dra->StopAccepting();
  // Calls in flight get a second.
  // A call still waiting on the API server then (the claim's Get) is
  // cancelled there: gRPC's shutdown waits for every handler to return.
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(1);
  std::mutex shut_mu;
  std::condition_variable shut_cv;
  bool shut = false;
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lock(shut_mu);
    if (!shut_cv.wait_until(lock, deadline, [&] { return shut; })) {
      lock.unlock();
      source_->Cancel();
    }
  });
  if (registration) registration->Shutdown(deadline);
  if (dra) dra->Shutdown(deadline);
  {
    std::lock_guard<std::mutex> lock(shut_mu);
    shut = true;
  }
  shut_cv.notify_all();
  canceller.join();
}

namespace {

// Connections open at once on one socket (the kubelet holds one or two); a
// new one beyond it closes another (unix_socket.h: idle first, of the peer
// holding the most, its newest), never the newcomer.
constexpr size_t kMaxConnections = 64;

}  // namespace

StatusOr<std::unique_ptr<plugin::ServedSocket>> DriverRunner::Impl::ServeAt(
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
  return plugin::ServedSocket::Serve(
      {.path = path,
       .services = std::move(services),
       .socket = {.mode = 0600,
                  .max_connections = kMaxConnections,
                  .in_place = in_place},
       .max_receive_bytes = 16 << 20});
}

Status DriverRunner::Impl::ServeDra() {
  std::vector<grpc::Service*> services = {&dra_v1_, &dra_v1beta1_};
  if (options_.serve_health) {
    services.push_back(health_.v1());
    services.push_back(health_.v1alpha1());
  }
  // The old server (its socket is gone) first: a socket path has one
  // listener.
  std::unique_ptr<plugin::ServedSocket> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(dra_served_);
  }
  old.reset();
  auto served = ServeAt(dra_socket_, std::move(services), /*in_place=*/false);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  dra_served_ = std::move(*served);
  return OkStatus();
}

Status DriverRunner::Impl::ServeRegistration() {
  std::unique_ptr<plugin::ServedSocket> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(registration_served_);
  }
  old.reset();
  {
    MutexLock lock(mu_);
    // A new socket is a new registration: the kubelet's watcher calls
    // GetInfo again.
    registered_ = false;
  }
  // The kubelet's plugin watcher stats every name that appears in the
  // registry: the socket is bound at its own name there.
  auto served =
      ServeAt(registration_socket_, {&registration_}, /*in_place=*/true);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  registration_served_ = std::move(*served);
  return OkStatus();
}

void DriverRunner::Impl::WatchSocketDirectories() {
  // The kubelet's plugin watcher finds sockets through fsnotify; a socket
  // it (or anyone) removes is noticed here the same way, and served again
  // at once rather than at the next look.
  std::vector<std::pair<std::filesystem::path, std::string>> watched = {
      {dra_socket_.parent_path(), dra_socket_.filename().string()},
      {registration_socket_.parent_path(),
       registration_socket_.filename().string()}};
  if (watched[0].first == watched[1].first) {
    watched.pop_back();
    watched[0].second.clear();  // both names
  }
  for (const auto& [dir, name] : watched) {
    auto watcher =
        plugin::DirWatcher::Start(dir, [this](const plugin::DirEvent& event) {
          if (event.kind == plugin::DirEvent::Kind::kCreated) return;
          bool look = event.kind == plugin::DirEvent::Kind::kListed;
          {
            MutexLock servers(server_mu_);
            for (const auto* served : {&dra_served_, &registration_served_}) {
              const std::filesystem::path& path =
                  served == &dra_served_ ? dra_socket_ : registration_socket_;
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

void DriverRunner::Impl::WatchSockets() {
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
      using Look = plugin::ServedSocket::Look;
      // Gone: nothing listens at the path; never served: nothing there yet
      // either (another process's socket is not ours to replace).
      const auto look = [](const std::unique_ptr<plugin::ServedSocket>& served,
                           const std::filesystem::path& path) {
        if (served) return served->LookAtPath();
        return SocketAt(path) && Listening(path) ? Look::kTaken : Look::kGone;
      };
      const Look dra = look(dra_served_, dra_socket_);
      const Look registration =
          look(registration_served_, registration_socket_);
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
      LOG(WARNING) << options_.driver_name << ": " << dra_socket_.string()
                   << " was removed; serving it again";
      if (Status served = ServeDra(); !served.ok()) {
        LOG(ERROR) << served.message();
      } else {
        dra_served = true;
      }
    }
    if (registration_gone || dra_served) {
      LOG(WARNING) << options_.driver_name << ": "
                   << registration_socket_.string()
                   << (registration_gone ? " was removed" : "")
                   << "; registering again";
      if (Status served = ServeRegistration(); !served.ok()) {
        LOG(ERROR) << served.message();
      }
    }
    lock.lock();
  }
}

void DriverRunner::Impl::OnRegistrationStatus(bool registered,
                                              const std::string& error) {
  {
    MutexLock lock(mu_);
    registered_ = registered;
    registration_error_ = registered ? std::string() : error;
  }
  if (registered) {
    LOG(INFO) << options_.driver_name << ": registered with the kubelet";
  } else {
    LOG(ERROR) << options_.driver_name
               << ": the kubelet refused the registration: " << error;
  }
}

std::filesystem::path RollingUpdateRegistrationSocket(
    const std::filesystem::path& registry_dir, const std::string& driver,
    const std::string& pod_uid) {
  const std::filesystem::path plain =
      registry_dir / (driver + "-" + pod_uid + "-reg.sock");
  if (plain.string().size() <= 107) return plain;
  const std::string hash = files::ChecksumHex(driver + "/" + pod_uid);
  return registry_dir / (driver.substr(0, 16) + "-" + hash + "-reg.sock");
}

std::vector<const OpaqueConfig*> ConfigsFor(const Claim& claim,
                                            std::string_view request) {
  const std::string_view top = BaseRequestName(request);
  std::vector<const OpaqueConfig*> out;
  for (const OpaqueConfig& config : claim.configs) {
    const bool applies =
        config.requests.empty() ||
        std::any_of(config.requests.begin(), config.requests.end(),
                    [&](const std::string& named) {
                      return named == request || named == top;
                    });
    if (applies) out.push_back(&config);
  }
  return out;
}

std::string HealthMessage(std::string_view message) {
  std::string out;
  out.reserve(std::min(message.size(), kMaxHealthMessage * 4));
  std::vector<size_t> ends;  // where each character ends in `out`
  size_t characters = 0;
  for (size_t i = 0; i < message.size();) {
    const size_t length = text::Utf8SequenceLength(message, i);
    if (length == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    } else {
      out.append(message.substr(i, length));
      i += length;
    }
    ++characters;
    if (characters <= kMaxHealthMessage - 3) ends.push_back(out.size());
    if (characters > kMaxHealthMessage) {
      out.resize(ends.back());
      return out + "...";
    }
  }
  return out;
}

// --- DriverRunner ------------------------------------------------------------

StatusOr<std::unique_ptr<DriverRunner>> DriverRunner::Create(
    DriverOptions options, ClaimSource* source, DriverHandler* handler) {
  if (Status valid = ValidateDriverName(options.driver_name);
      !valid.ok() || !k8s::IsDns1123Subdomain(options.driver_name)) {
    return InvalidArgumentError(
        "driver name \"" + options.driver_name.substr(0, 80) +
        "\" is not one the API server accepts (a lower-case DNS subdomain of "
        "at most 63 characters)" +
        (valid.ok() ? std::string() : ": " + valid.message()));
  }
  if (source == nullptr || handler == nullptr) {
    return InvalidArgumentError("a claim source and a handler are needed");
  }
  if (options.plugin_dir.empty()) {
    options.plugin_dir =
        std::filesystem::path(kDefaultPluginRoot) / options.driver_name;
  }
  if (options.state_dir.empty()) options.state_dir = options.plugin_dir;
  for (const auto& [what, dir] :
       {std::pair<const char*, const std::filesystem::path*>{
            "registry directory", &options.registry_dir},
        {"plugin directory", &options.plugin_dir},
        {"state directory", &options.state_dir}}) {
    if (!dir->is_absolute()) {
      return InvalidArgumentError(std::string("the ") + what + " " +
                                  dir->string() + " is not absolute");
    }
  }
  if (!options.pod_uid.empty() &&
      !Impl::RefusedUid({"", options.pod_uid, "pod"}).empty()) {
    return InvalidArgumentError("pod UID \"" + options.pod_uid.substr(0, 64) +
                                "\" is not a Kubernetes UID");
  }
  // A unix socket path is at most 107 bytes.
  const auto longest = std::max(
      (options.pod_uid.empty()
           ? options.registry_dir / (options.driver_name + "-reg.sock")
           : RollingUpdateRegistrationSocket(
                 options.registry_dir, options.driver_name, options.pod_uid))
          .string()
          .size(),
      (options.plugin_dir / (options.pod_uid.empty()
                                 ? std::string(kDraSocket)
                                 : "dra-" + options.pod_uid + ".sock"))
          .string()
          .size());
  if (longest > 107) {
    return InvalidArgumentError(
        "socket paths of at most 107 bytes are "
        "possible; the directories make one of " +
        std::to_string(longest));
  }
  return std::unique_ptr<DriverRunner>(new DriverRunner(
      std::make_unique<Impl>(std::move(options), source, handler)));
}

DriverRunner::DriverRunner(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
DriverRunner::~DriverRunner() = default;
Status DriverRunner::Start() { return impl_->Start(); }
void DriverRunner::Stop() { impl_->Stop(); }
bool DriverRunner::registered() const { return impl_->registered(); }
std::string DriverRunner::registration_error() const {
  return impl_->registration_error();
}
void DriverRunner::SetHealth(std::vector<DeviceHealth> devices) {
  impl_->SetHealth(std::move(devices));
}

void DriverRunner::RefreshHealth() { impl_->RefreshHealth(); }
std::vector<ClaimRef> DriverRunner::PreparedClaims() const {
  return impl_->PreparedClaims();
}
const std::filesystem::path& DriverRunner::registration_socket() const {
  return impl_->registration_socket();
}
const std::filesystem::path& DriverRunner::dra_socket() const {
  return impl_->dra_socket();
}

}  // namespace topology::draplugin
