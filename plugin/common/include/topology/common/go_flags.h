// Command lines as Go programs take them. Go's flag package (the kubelet's,
// klog's and every Go device plugin's) accepts a long flag with one dash as
// well as two: "-v=2", "-config=/etc/x.yaml". Operators copy such lines
// from Go plugins' manifests; CLI11 would read "-v=2" as the short option
// -v with the value "=2". Header-only, so that a program without the
// framework library can use it.
#ifndef TOPOLOGY_COMMON_GO_FLAGS_H_
#define TOPOLOGY_COMMON_GO_FLAGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace topology::common {

// argv with every "-name=value" (one dash, a name of letters, digits and
// dashes, then '=') written "--name=value"; everything else unchanged,
// and nothing after a bare "--".
inline std::vector<std::string> GoStyleArguments(int argc,
                                                 const char* const* argv) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(argc));
  bool options_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];  // NOLINT(cppcoreguidelines-pro-bounds-*)
    if (arg == "--") options_done = true;
    const size_t eq = arg.find('=');
    if (!options_done && i > 0 && arg.size() > 2 && arg[0] == '-' &&
        arg[1] != '-' && eq != std::string::npos && eq > 1) {
      const std::string_view name(arg.data() + 1, eq - 1);
      bool word = true;
      for (char c : name) {
        word = word && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-');
      }
      if (word) arg.insert(0, "-");
    }
    out.push_back(std::move(arg));
  }
  return out;
}

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_GO_FLAGS_H_
