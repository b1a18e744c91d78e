// Log lines in the kubelet's klog format through glog:
//   I1121 11:57:39.123456   12345 plugin_runner.cc:42] message
#ifndef TOPOLOGY_COMMON_LOGGING_H_
#define TOPOLOGY_COMMON_LOGGING_H_

#include "topology/export.h"  // C++20 check

namespace topology::common {

// Sends glog output to stderr with klog-style prefixes at verbosity `v`
// (VLOG(n) prints when n <= v). Call once, early in main().
void InitLogging(const char* argv0, int verbosity);

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_LOGGING_H_
