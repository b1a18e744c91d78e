#include "topology/common/text_util.h"

#include "driver_runner_impl.h"

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
  std::vector<grpc::Service*> dra_services = {&dra_v1_, &dra_v1beta1_};
  if (options_.serve_health) {
    dra_services.push_back(health_.v1());
    dra_services.push_back(health_.v1alpha1());
  }
  sockets_ = std::make_unique<DriverSockets>(
      DriverSockets::Options{.driver_name = options_.driver_name,
                             .dra_socket = dra_socket_,
                             .registration_socket = registration_socket_,
                             .socket_check = options_.socket_check,
                             .clock = options_.clock},
      std::move(dra_services), &registration_, [this] {
        MutexLock lock(mu_);
        registered_ = false;
      });
  if (Status served = sockets_->Start(); !served.ok()) {
    Stop();
    return served;
  }
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
  // A call waiting for the instances' lock sees the stop at once.
  if (instances_) instances_->Interrupt();
  // No claim's turn is had from now on; the health streams end at once.
  claims_.Stop();
  health_.Stop();
  if (sockets_) {
    sockets_->StopWatching();
    // No new connection.
    sockets_->StopAccepting();
  }
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
  if (sockets_) sockets_->Shutdown(deadline);
  {
    std::lock_guard<std::mutex> lock(shut_mu);
    shut = true;
  }
  shut_cv.notify_all();
  canceller.join();
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
void DriverRunner::ReportHealth(const std::string& source,
                                std::vector<DeviceHealth> devices) {
  impl_->ReportHealth(source, std::move(devices));
}

void DriverRunner::SetHealth(std::vector<DeviceHealth> devices) {
  impl_->ReportHealth("", std::move(devices));
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
