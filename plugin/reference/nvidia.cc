#include "nvidia.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace topology::device_plugin {
namespace {

std::string_view Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

bool IsUuid(std::string_view uuid) {
  // "GPU-" or "MIG-" then hex digits and dashes, as nvidia-smi prints them.
  if (uuid.size() < 5 || uuid.size() > 64 ||
      !(uuid.starts_with("GPU-") || uuid.starts_with("MIG-"))) {
    return false;
  }
  return std::all_of(uuid.begin() + 4, uuid.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F') || c == '-';
  });
}

}  // namespace

StatusOr<NvidiaGpuInformation> ParseNvidiaGpuInformation(
    std::string_view text) {
  NvidiaGpuInformation info;
  bool have_minor = false;
  bool have_uuid = false;
  bool have_model = false;
  bool have_location = false;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    const std::string where = "line " + std::to_string(line_number) + " (" +
                              std::string(key.substr(0, 32)) + ")";
    // A field given twice: which one the driver meant is unknown.
    bool* seen = key == "Device Minor"   ? &have_minor
                 : key == "GPU UUID"     ? &have_uuid
                 : key == "Model"        ? &have_model
                 : key == "Bus Location" ? &have_location
                                         : nullptr;
    if (seen != nullptr && *seen) {
      return DataLossError(where + ": given twice");
    }
    if (key == "Device Minor") {
      uint32_t minor = 0;
      const auto [ptr, error] =
          std::from_chars(value.data(), value.data() + value.size(), minor);
      if (value.empty() || error != std::errc() ||
          ptr != value.data() + value.size() || minor > 255) {
        return DataLossError(where + ": not a device minor from 0 to 255");
      }
      info.minor = minor;
      have_minor = true;
    } else if (key == "GPU UUID") {
      if (!IsUuid(value)) {
        return DataLossError(where + ": not a GPU UUID (GPU-<hex>)");
      }
      info.uuid = std::string(value);
      have_uuid = true;
    } else if (key == "Model") {
      info.model = std::string(value.substr(0, 128));
      have_model = true;
    } else if (key == "Bus Location") {
      info.bus_location = std::string(value.substr(0, 32));
      have_location = true;
    }
  }
  if (!have_minor) return DataLossError("no \"Device Minor\" line");
  if (!have_uuid) return DataLossError("no \"GPU UUID\" line");
  return info;
}

StatusOr<NvidiaGpuInformation> ReadNvidiaGpuInformation(
    const std::filesystem::path& host_root, const PciAddress& address) {
  const std::filesystem::path path = host_root / "proc/driver/nvidia/gpus" /
                                     address.ToString() / "information";
  const int fd =
      open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    const std::string message = path.string() + ": " + std::strerror(error) +
                                " (is the NVIDIA driver loaded and the host's "
                                "/proc/driver/nvidia visible?)";
    return error == ENOENT ? NotFoundError(message)
                           : FailedPreconditionError(message);
  }
  std::string text;
  char buffer[4096];
  constexpr size_t kMax = size_t{64} * 1024;
  while (text.size() <= kMax) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  if (text.size() > kMax) {
    return OutOfRangeError(path.string() + ": larger than 64 KiB");
  }
  auto info = ParseNvidiaGpuInformation(text);
  if (!info.ok()) {
    return DataLossError(path.string() + ": " + info.status().message());
  }
  if (!info->bus_location.empty()) {
    auto location = PciAddress::Parse(info->bus_location);
    if (!location.ok() || !(*location == address)) {
      return DataLossError(path.string() + ": Bus Location " +
                           info->bus_location + " is not " +
                           address.ToString());
    }
  }
  return info;
}

NvidiaInventory ReadNvidiaInventory(const std::filesystem::path& host_root,
                                    const std::vector<PciAddress>& addresses) {
  NvidiaInventory inventory;
  if (addresses.empty()) return inventory;
  const std::filesystem::path driver = host_root / "proc/driver/nvidia";
  std::error_code error;
  if (!std::filesystem::is_directory(driver, error)) {
    inventory.driver_missing =
        driver.string() +
        " is not there: the NVIDIA driver is not loaded, or the host's "
        "/proc/driver/nvidia is not mounted under the host root";
  }
  std::map<uint32_t, std::vector<PciAddress>> by_minor;
  std::map<std::string, std::vector<PciAddress>> by_uuid;
  for (const PciAddress& address : addresses) {
    auto info = ReadNvidiaGpuInformation(host_root, address);
    if (!info.ok()) {
      inventory.problems[address] = !inventory.driver_missing.empty()
                                        ? inventory.driver_missing
                                        : info.status().message();
      continue;
    }
    by_minor[info->minor].push_back(address);
    by_uuid[info->uuid].push_back(address);
    inventory.gpus.emplace(address, std::move(*info));
  }
  // Every GPU of a shared value is refused: which one the value belongs to
  // cannot be told.
  const auto refuse = [&](const std::vector<PciAddress>& sharing,
                          const std::string& what) {
    if (sharing.size() < 2) return;
    for (const PciAddress& address : sharing) {
      std::string others;
      for (const PciAddress& other : sharing) {
        if (other == address) continue;
        others += (others.empty() ? "" : ", ") + other.ToString();
      }
      inventory.problems[address] =
          "the NVIDIA driver gives " + what + " to this GPU and to " + others;
      inventory.gpus.erase(address);
    }
  };
  for (const auto& [minor, sharing] : by_minor) {
    refuse(sharing, "Device Minor " + std::to_string(minor) + " (/dev/nvidia" +
                        std::to_string(minor) + ")");
  }
  for (const auto& [uuid, sharing] : by_uuid) {
    refuse(sharing, "GPU UUID " + uuid);
  }
  return inventory;
}

std::vector<std::string> NvidiaControlNodes(
    const std::filesystem::path& host_root) {
  static constexpr const char* kNodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                           "/dev/nvidia-uvm-tools",
                                           "/dev/nvidia-modeset"};
  std::error_code error;
  if (!std::filesystem::is_directory(host_root / "dev", error)) {
    return {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
  }
  std::vector<std::string> out;
  for (const char* node : kNodes) {
    if (std::filesystem::exists(host_root / (node + 1), error)) {
      out.emplace_back(node);
    }
  }
  return out;
}

void AddNvidiaOutputs(const std::vector<NvidiaGpuInformation>& gpus,
                      const std::vector<std::string>& control_nodes,
                      plugin::ContainerAllocation& allocation) {
  std::set<std::string> present;
  for (const common::DeviceNode& node : allocation.devices) {
    present.insert(node.container_path);
  }
  auto add = [&](const std::string& path) {
    if (present.insert(path).second) {
      allocation.devices.push_back({path, path, "rw"});
    }
  };
  std::string visible;
  for (const NvidiaGpuInformation& gpu : gpus) {
    add("/dev/nvidia" + std::to_string(gpu.minor));
    visible += (visible.empty() ? "" : ",") + gpu.uuid;
    allocation.cdi_devices.push_back("nvidia.com/gpu=" + gpu.uuid);
  }
  for (const std::string& node : control_nodes) add(node);
  allocation.envs["NVIDIA_VISIBLE_DEVICES"] = visible;
}

}  // namespace topology::device_plugin
