#include "topology/common/logging.h"

#include <cstdio>
#include <ostream>

#include <glog/logging.h>

namespace topology::common {
namespace {

const char* BaseName(const char* path) {
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

// klog: Lmmdd hh:mm:ss.uuuuuu threadid file:line]
void KlogPrefix(std::ostream& out, const google::LogMessageInfo& info,
                void* /*data*/) {
  char header[64];
  std::snprintf(header, sizeof(header), "%c%02d%02d %02d:%02d:%02d.%06d %7d ",
                info.severity[0], info.time.month() + 1, info.time.day(),
                info.time.hour(), info.time.min(), info.time.sec(),
                info.time.usec(), info.thread_id);
  out << header << BaseName(info.filename) << ':' << info.line_number << ']';
}

}  // namespace

void InitLogging(const char* argv0, int verbosity) {
  FLAGS_logtostderr = true;
  FLAGS_v = verbosity;
  google::InitGoogleLogging(argv0, &KlogPrefix, nullptr);
}

}  // namespace topology::common
