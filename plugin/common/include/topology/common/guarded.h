// The one exception guard of the project's daemons and programs. Vendor
// code (a device plugin's handlers, a DRA driver's Prepare), libraries and
// the allocator may throw; what they throw never ends a daemon, and is
// never lost: a call's exception becomes that call's INTERNAL status, a
// program's ends it with one line and exit 1. Header-only, so the host's
// gRPC-free command line uses it too.
//
// Thread safety: free functions, as safe as the call they guard.
#ifndef TOPOLOGY_COMMON_GUARDED_H_
#define TOPOLOGY_COMMON_GUARDED_H_

#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "topology/status.h"

namespace topology::common {

// The exception being handled, in words: "threw: <what()>", or "threw a
// non-standard exception" for one not derived from std::exception. Call
// only inside a catch block.
inline std::string DescribeCurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  } catch (...) {
    return "threw a non-standard exception";
  }
}

// Runs `call` (returning Status or StatusOr<T>); an exception it throws
// becomes INTERNAL "<who> threw: <what>", so the caller answers with it and
// logs it instead of ending the process (gRPC would answer a bare
// "Unexpected error in RPC handling" and log nothing).
template <typename Call>
auto CallGuarded(std::string_view who, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (...) {
    return InternalError(std::string(who) + " " + DescribeCurrentException());
  }
}

// Runs a program's body; anything thrown past it (out of memory, a
// library's exception) ends the program with "<program>: <who> threw: ..."
// on standard error and exit 1.
template <typename Run>
int RunGuarded(std::string_view program, Run&& run) {
  try {
    return run();
  } catch (...) {
    std::cerr << program << ": the program " << DescribeCurrentException()
              << "\n";
  }
  return 1;
}

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_GUARDED_H_
