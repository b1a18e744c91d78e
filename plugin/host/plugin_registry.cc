#include "plugin_registry.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "topology/common/kubelet_names.h"
#include "topology/common/text_util.h"

#include "plugin_endpoint.h"

namespace topology::host {

using text::IsValidUtf8;
using text::Quoted;

PluginRegistry::PluginRegistry(Options options, manager::DeviceManager* devices,
                               ChangeCallback on_change)
    : options_(std::move(options)),
      devices_(devices),
      on_change_(std::move(on_change)) {}

PluginRegistry::~PluginRegistry() { Stop(); }

Status PluginRegistry::Register(const std::string& version,
                                const std::string& endpoint,
                                const std::string& resource) {
  if (version != kubelet::kApiVersion) {
    return Status(StatusCode::kUnknown,
                  "requested API version \"" + version +
                      "\" is not supported by kubelet. Supported version is "
                      "[\"v1beta1\"]");
  }
  if (!kubelet::ValidateResourceName(resource).ok()) {
    return Status(StatusCode::kUnknown,
                  "the ResourceName \"" + resource + "\" is invalid");
  }
  if (Status valid = kubelet::ValidateEndpointName(endpoint); !valid.ok()) {
    return Status(StatusCode::kUnknown, "invalid endpoint: " + valid.message());
  }
  uint64_t number = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) return UnavailableError("shutting down");
    number = ++registrations_;
  }
  // Dialled without the lock: a slow plugin delays only its own
  // registration.
  auto connected = PluginEndpoint::Connect(
      resource, options_.plugin_dir / endpoint, options_.dial_timeout,
      options_.rpc_timeout, options_.clock);
  if (!connected.ok()) {
    LOG(WARNING) << resource << ": " << connected.status().message();
    return connected.status();
  }
  std::shared_ptr<PluginEndpoint> fresh = *connected;
  {
    MutexLock lock(mu_);
    if (stopping_) return UnavailableError("shutting down");
    Entry& entry = entries_[resource];
    if (entry.installed_registration > number) {
      // A newer registration of this resource finished first (a plugin
      // that registered twice, or a slow dial): it stays, this one is
      // dropped. The plugin is told OK, as its newer socket is served.
      LOG(INFO) << resource << ": registration of " << endpoint
                << " is older than the current one; ignored";
      return OkStatus();
    }
    if (entry.endpoint) {
      // The newest registration wins; the old connection is closed and its
      // late messages are ignored. It stays referenced (retired_) until
      // its reader has returned.
      LOG(INFO) << resource << ": " << endpoint << " replaces "
                << entry.endpoint->socket().filename().string();
      entry.endpoint->Stop();
      retired_.push_back(entry.endpoint);
    }
    entry.endpoint = fresh;
    entry.installed_registration = number;
    entry.stopped_since.reset();
    // Calls go to the new connection at once, as in the kubelet, even
    // before its first list (the old one is stopped).
    devices_->SetEndpoint(resource, fresh);
    // Started under the lock, so that Stop() always sees every reader.
    fresh->Start(
        [this](PluginEndpoint* e, std::vector<manager::Device> d) {
          OnList(e, std::move(d));
        },
        [this](PluginEndpoint* e, const Status& why) { OnEnd(e, why); });
  }
  LOG(INFO) << "registered " << resource << " at " << endpoint
            << (fresh->options().get_preferred_allocation_available
                    ? " (GetPreferredAllocation)"
                    : "")
            << (fresh->options().pre_start_required ? " (PreStartContainer)"
                                                    : "");
  return OkStatus();
}

void PluginRegistry::OnList(PluginEndpoint* endpoint,
                            std::vector<manager::Device> devices) {
  const std::string& resource = endpoint->resource();
  {
    MutexLock lock(mu_);
    auto it = entries_.find(resource);
    if (it == entries_.end() || it->second.endpoint.get() != endpoint) return;
    // Ids no later step can carry are refused, each named: empty (the
    // kubelet's maps and the checkpoint would hold a nameless device), not
    // UTF-8 (a protobuf string and the JSON views must be), or with control
    // characters (they would break the log and the journal's lines).
    std::string refused;
    size_t refused_count = 0;
    std::erase_if(devices, [&](const manager::Device& device) {
      const char* why = nullptr;
      if (device.id.empty()) {
        why = "is empty";
      } else if (!IsValidUtf8(device.id)) {
        why = "is not UTF-8";
      } else if (std::any_of(device.id.begin(), device.id.end(), [](char c) {
                   return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                 })) {
        why = "has control characters";
      }
      if (why == nullptr) return false;
      if (++refused_count <= 4) {
        refused += std::string(refused.empty() ? "" : ", ") + "id " +
                   Quoted(device.id) + " " + why;
      }
      return true;
    });
    if (refused_count > 0) {
      it->second.problem = std::to_string(refused_count) +
                           " device(s) of the last list refused: " + refused;
      LOG(WARNING) << resource << ": " << it->second.problem;
    } else {
      it->second.problem.clear();
    }
    // Duplicate ids: the last entry wins, as in a Go map, but say so.
    std::map<std::string, manager::Device> unique;
    for (manager::Device& device : devices) {
      if (unique.contains(device.id)) {
        LOG(WARNING) << resource << ": device " << device.id
                     << " listed twice; the last entry counts";
      }
      unique[device.id] = std::move(device);
    }
    std::vector<manager::Device> list;
    list.reserve(unique.size());
    for (auto& [id, device] : unique) list.push_back(std::move(device));
    VLOG(1) << resource << ": " << list.size() << " devices";
    // Under the registry's lock: a list of a replaced endpoint never lands
    // after its successor's.
    devices_->UpdateResource(resource, std::move(list), it->second.endpoint);
  }
  on_change_(resource, Change::kDevices);
}

void PluginRegistry::OnEnd(PluginEndpoint* endpoint, const Status& why) {
  const std::string& resource = endpoint->resource();
  {
    MutexLock lock(mu_);
    auto it = entries_.find(resource);
    if (it == entries_.end() || it->second.endpoint.get() != endpoint) return;
    if (stopping_) return;
    it->second.problem =
        why.ok() ? "the plugin ended its ListAndWatch stream" : why.ToString();
    LOG(WARNING) << resource << ": plugin at " << endpoint->socket().string()
                 << " disconnected (" << it->second.problem
                 << "); allocatable is 0 until it registers again";
    it->second.stopped_since = options_.clock->Now();
    // As the kubelet: every device moves to the unhealthy set (capacity
    // stays, allocatable is 0) until a new registration sends a list.
    devices_->MarkUnhealthy(resource);
  }
  on_change_(resource, Change::kDevices);
}

void PluginRegistry::AddRestored(const std::string& resource) {
  {
    MutexLock lock(mu_);
    Entry& entry = entries_[resource];
    if (entry.endpoint) return;  // registered meanwhile
    entry.stopped_since = options_.clock->Now();
  }
  devices_->UpdateResource(resource, {}, nullptr);
}

void PluginRegistry::StartCollector() {
  MutexLock lock(mu_);
  if (stopping_ || collector_.joinable()) return;
  collector_ = std::thread([this] { Collect(); });
}

void PluginRegistry::Collect() {
  const auto tick =
      std::clamp(options_.grace_period / 4, std::chrono::milliseconds(10),
                 std::chrono::milliseconds(1000));
  const Clock& clock = *options_.clock;
  MutexLock lock(mu_);
  auto next = clock.Now() + tick;
  while (!stopping_) {
    if (clock.Now() < next) {
      clock.WaitUntil(collector_wake_, lock, next);
      continue;
    }
    const auto now = clock.Now();
    next = now + tick;
    std::vector<std::string> removed;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const auto& since = it->second.stopped_since;
      if (since && now - *since >= options_.grace_period) {
        LOG(INFO) << it->first << ": no plugin for "
                  << options_.grace_period.count() << " ms; resource removed";
        devices_->RemoveResource(it->first);
        if (it->second.endpoint) retired_.push_back(it->second.endpoint);
        removed.push_back(it->first);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    // Connections whose reader has returned can go (outside the lock).
    std::vector<std::shared_ptr<PluginEndpoint>> done;
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->finished()) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    done.clear();
    for (const std::string& resource : removed) {
      on_change_(resource, Change::kRemoved);
    }
    lock.lock();
  }
}

std::vector<std::shared_ptr<PluginEndpoint>> PluginRegistry::AllEndpoints()
    const {
  std::vector<std::shared_ptr<PluginEndpoint>> endpoints;
  for (const auto& [name, entry] : entries_) {
    if (entry.endpoint) endpoints.push_back(entry.endpoint);
  }
  endpoints.insert(endpoints.end(), retired_.begin(), retired_.end());
  return endpoints;
}

void PluginRegistry::StopEndpoints() {
  std::vector<std::shared_ptr<PluginEndpoint>> endpoints;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    endpoints = AllEndpoints();
  }
  collector_wake_.notify_all();
  if (collector_.joinable() &&
      collector_.get_id() != std::this_thread::get_id()) {
    collector_.join();
  }
  for (auto& endpoint : endpoints) endpoint->Stop();
}

void PluginRegistry::Stop() {
  // No Register installs an endpoint once stopping_ is set (one may have
  // raced a first StopEndpoints: this pass stops it too).
  StopEndpoints();
  std::vector<std::shared_ptr<PluginEndpoint>> endpoints;
  {
    MutexLock lock(mu_);
    endpoints = AllEndpoints();
  }
  // The readers return once their stream is cancelled; bounded, as a stop
  // must end within seconds whatever a plugin does.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& endpoint : endpoints) {
    while (!endpoint->finished() &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  {
    MutexLock lock(mu_);
    for (auto& [name, entry] : entries_) entry.endpoint.reset();
    retired_.clear();
  }
  devices_->ForgetEndpoints();
}

std::shared_ptr<PluginEndpoint> PluginRegistry::Endpoint(
    const std::string& resource) const {
  MutexLock lock(mu_);
  const auto it = entries_.find(resource);
  return it == entries_.end() ? nullptr : it->second.endpoint;
}

std::vector<PluginRegistry::PluginState> PluginRegistry::Snapshot() const {
  MutexLock lock(mu_);
  std::vector<PluginState> out;
  out.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) {
    PluginState state;
    state.resource = name;
    if (entry.endpoint) state.socket = entry.endpoint->socket().string();
    state.connected = entry.endpoint && !entry.stopped_since.has_value();
    state.problem = entry.problem;
    out.push_back(std::move(state));
  }
  return out;
}

std::vector<std::string> PluginRegistry::Resources() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

}  // namespace topology::host
