// Container Device Interface (CDI) specs that a plugin writes for the device
// names it returns: a CDI-enabled runtime (containerd 2.x by default, CRI-O,
// containerd 1.7 with enable_cdi) refuses to create a container whose
// "<kind>=<name>" no spec under /etc/cdi or /var/run/cdi defines. One file
// per kind and plugin, replaced atomically whenever the devices change.
// Thread safety: free functions; two writers of one file must not race.
#ifndef TOPOLOGY_COMMON_CDI_H_
#define TOPOLOGY_COMMON_CDI_H_

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "topology/common/container_edits.h"
#include "topology/status.h"

namespace topology::common {

// Where runtimes look for specs written at run time.
inline constexpr char kDefaultCdiDir[] = "/var/run/cdi";

// One device of a spec and the container edits it brings.
struct CdiDevice {
  std::string name = {};  // "0000:1a:00.0", "GPU-6a1b..."
  std::vector<DeviceNode> device_nodes = {};
  std::vector<Mount> mounts = {};
  std::map<std::string, std::string> env = {};
};

struct CdiSpec {
  std::string kind = {};  // "vendor.com/class"
  std::vector<CdiDevice> devices = {};
};

// INVALID_ARGUMENT naming what is wrong, as the CDI specification's parser
// refuses it: a kind "<DNS subdomain>/<name>" (name at most 63 characters
// of [A-Za-z0-9_.-], alphanumeric at both ends); a device name of
// [A-Za-z0-9_.:-], alphanumeric at both ends.
Status ValidateCdiKind(std::string_view kind);
Status ValidateCdiDeviceName(std::string_view name);

// The oldest released CDI version that can express `spec` (0.3.0; 0.5.0
// for device names that start with a digit or device nodes with a host
// path), so that runtimes with older CDI libraries read it too.
std::string MinimumCdiVersion(const CdiSpec& spec);

// The spec as JSON. INVALID_ARGUMENT for a bad kind or name, a name given
// twice, a device without container edits (runtimes refuse the whole spec
// for one), or a path that is not absolute.
StatusOr<std::string> CdiSpecJson(const CdiSpec& spec);

// Replaces <dir>/<file_name> with the spec: written to a new temporary
// file beside it (O_EXCL|O_NOFOLLOW, mode 0644 whatever the umask),
// fsynced and renamed over it, then the directory fsynced; nothing is
// written when the file already holds exactly this text. `file_name` is a
// plain name ending in ".json". Errors name the file.
Status WriteCdiSpec(const std::filesystem::path& dir,
                    const std::string& file_name, const CdiSpec& spec);

// Removes <dir>/<file_name> (a link is removed, never followed); OK when
// absent.
Status RemoveCdiSpec(const std::filesystem::path& dir,
                     const std::string& file_name);

// The resolver: which CDI device names the spec files of a node define,
// every "<kind>=<name>" of every *.json, *.yaml and *.yml file in the given
// directories (a runtime's /etc/cdi and /var/run/cdi), read as the runtime
// reads them (YAML, of which JSON is a part).

// The "<kind>=<name>" names one spec's text defines; INVALID_ARGUMENT when
// it is not YAML (or JSON) or has no kind or no device list.
StatusOr<std::set<std::string>> CdiNamesOf(std::string_view text);

// The names defined in `dirs` (missing directories define none). A file
// that cannot be read or parsed (over 16 MiB, not YAML, no kind) defines
// none and adds a warning naming it, as a runtime skips it.
std::set<std::string> CdiDefinedNames(
    const std::vector<std::filesystem::path>& dirs,
    std::vector<std::string>* warnings);

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_CDI_H_
