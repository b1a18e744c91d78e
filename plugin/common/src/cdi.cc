#include "topology/common/cdi.h"

#include <cerrno>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "topology/common/safe_file.h"

namespace topology::common {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

// [A-Za-z0-9] at both ends, `inner` characters between.
bool Segment(std::string_view text, std::string_view inner) {
  if (text.empty() || !IsAlnum(text.front()) || !IsAlnum(text.back())) {
    return false;
  }
  for (char c : text) {
    if (!IsAlnum(c) && inner.find(c) == std::string_view::npos) return false;
  }
  return true;
}

std::string Shown(std::string_view text) {
  return "\"" + std::string(text.substr(0, 80)) +
         (text.size() > 80 ? "...\"" : "\"");
}

std::string Errno() { return std::strerror(errno); }

// The current contents of a regular file `path`, or "" (absent, a link,
// not regular, larger than `max`).
std::string CurrentText(const std::filesystem::path& path, size_t max) {
  auto text = files::ReadRegularFile(path, max);
  return text.ok() ? std::move(*text) : std::string();
}

}  // namespace

Status ValidateCdiKind(std::string_view kind) {
  const size_t slash = kind.find('/');
  if (slash == std::string_view::npos) {
    return InvalidArgumentError("CDI kind " + Shown(kind) +
                                " is not \"<vendor domain>/<class>\"");
  }
  const std::string_view vendor = kind.substr(0, slash);
  const std::string_view name = kind.substr(slash + 1);
  if (vendor.size() > 253) {
    return InvalidArgumentError("CDI kind " + Shown(kind) +
                                ": the vendor is longer than 253 characters");
  }
  size_t from = 0;
  while (true) {
    const size_t dot = vendor.find('.', from);
    const std::string_view label = vendor.substr(
        from,
        dot == std::string_view::npos ? std::string_view::npos : dot - from);
    if (label.size() > 63 || !Segment(label, "-")) {
      return InvalidArgumentError("CDI kind " + Shown(kind) +
                                  ": the vendor is not a DNS subdomain");
    }
    if (dot == std::string_view::npos) break;
    from = dot + 1;
  }
  if (name.size() > 63 || !Segment(name, "-_.")) {
    return InvalidArgumentError(
        "CDI kind " + Shown(kind) +
        ": the class must be at most 63 characters of letters, digits, "
        "'-', '_' and '.', alphanumeric at both ends");
  }
  return OkStatus();
}

Status ValidateCdiDeviceName(std::string_view name) {
  if (!Segment(name, "-_.:")) {
    return InvalidArgumentError(
        "CDI device name " + Shown(name) +
        " must be letters, digits, '-', '_', '.' and ':', alphanumeric at "
        "both ends");
  }
  return OkStatus();
}

std::string MinimumCdiVersion(const CdiSpec& spec) {
  for (const CdiDevice& device : spec.devices) {
    const char first = device.name.empty() ? 'a' : device.name.front();
    if (!((first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z'))) {
      return "0.5.0";
    }
    for (const DeviceNode& node : device.device_nodes) {
      if (!node.host_path.empty() && node.host_path != node.container_path) {
        return "0.5.0";
      }
    }
  }
  return "0.3.0";
}

StatusOr<std::string> CdiSpecJson(const CdiSpec& spec) {
  if (Status kind = ValidateCdiKind(spec.kind); !kind.ok()) return kind;
  using nlohmann::json;
  json devices = json::array();
  std::set<std::string> names;
  for (const CdiDevice& device : spec.devices) {
    if (Status name = ValidateCdiDeviceName(device.name); !name.ok()) {
      return name;
    }
    if (!names.insert(device.name).second) {
      return InvalidArgumentError("CDI device " + Shown(device.name) +
                                  " is given twice in kind " + spec.kind);
    }
    if (device.device_nodes.empty() && device.mounts.empty() &&
        device.env.empty()) {
      // A runtime refuses the whole spec ("empty device edits").
      return InvalidArgumentError("CDI device " + Shown(device.name) +
                                  " of kind " + spec.kind +
                                  " has no container edits");
    }
    json edits = json::object();
    if (!device.env.empty()) {
      json env = json::array();
      for (const auto& [key, value] : device.env)
        env.push_back(key + "=" + value);
      edits["env"] = std::move(env);
    }
    if (!device.device_nodes.empty()) {
      json nodes = json::array();
      for (const DeviceNode& node : device.device_nodes) {
        if (!node.container_path.starts_with('/')) {
          return InvalidArgumentError(
              "CDI device " + Shown(device.name) + ": device node " +
              Shown(node.container_path) + " is not an absolute path");
        }
        // No type, major or minor: the runtime reads them from the node
        // itself when the container starts.
        json entry = {{"path", node.container_path}};
        if (!node.host_path.empty() && node.host_path != node.container_path) {
          entry["hostPath"] = node.host_path;
        }
        if (!node.permissions.empty()) entry["permissions"] = node.permissions;
        nodes.push_back(std::move(entry));
      }
      edits["deviceNodes"] = std::move(nodes);
    }
    if (!device.mounts.empty()) {
      json mounts = json::array();
      for (const Mount& mount : device.mounts) {
        if (!mount.container_path.starts_with('/') ||
            !mount.host_path.starts_with('/')) {
          return InvalidArgumentError("CDI device " + Shown(device.name) +
                                      ": mount paths must be absolute");
        }
        json options = json::array({"bind"});
        options.push_back(mount.read_only ? "ro" : "rw");
        mounts.push_back({{"hostPath", mount.host_path},
                          {"containerPath", mount.container_path},
                          {"options", std::move(options)}});
      }
      edits["mounts"] = std::move(mounts);
    }
    devices.push_back({{"name", device.name}, {"containerEdits", edits}});
  }
  const json document = {{"cdiVersion", MinimumCdiVersion(spec)},
                         {"kind", spec.kind},
                         {"devices", std::move(devices)}};
  return document.dump(2) + "\n";
}

Status WriteCdiSpec(const std::filesystem::path& dir,
                    const std::string& file_name, const CdiSpec& spec) {
  if (file_name.empty() || file_name.find('/') != std::string::npos ||
      file_name.starts_with('.') || !file_name.ends_with(".json")) {
    return InvalidArgumentError("CDI spec file name " + Shown(file_name) +
                                " is not a plain \"<name>.json\"");
  }
  auto text = CdiSpecJson(spec);
  if (!text.ok()) return text.status();
  const std::filesystem::path path = dir / file_name;
  if (CurrentText(path, text->size() + 1) == *text) return OkStatus();
  // The project's one writer for directories others may write: an O_EXCL
  // temporary relative to the directory (no link followed, the directory
  // itself not a link), 0644 for the runtime, fsync, rename, fsync.
  if (Status written = files::WriteFileAtomically(path, *text, 0644);
      !written.ok()) {
    return FailedPreconditionError("cannot write the CDI spec " +
                                   path.string() + ": " + written.message());
  }
  return OkStatus();
}

Status RemoveCdiSpec(const std::filesystem::path& dir,
                     const std::string& file_name) {
  const std::filesystem::path path = dir / file_name;
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FailedPreconditionError("cannot remove the CDI spec " +
                                   path.string() + ": " + Errno());
  }
  return OkStatus();
}

}  // namespace topology::common
