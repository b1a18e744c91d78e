#!/bin/sh
# The gRPC programs carry gRPC, Protocol Buffers, abseil, OpenSSL, glog and
# yaml-cpp linked in, and the C++ runtime with them (cmake/
# static_grpc_link.py): none of those is loaded at start, and each program
# still runs.
#   static_grpc_test.sh PROGRAM...
set -eu
for program in "$@"; do
  if readelf -d "$program" |
    grep -E 'NEEDED.*lib(grpc|gpr|upb|protobuf|absl|ssl|crypto|cares|re2|glog|gflags|yaml-cpp|stdc\+\+)'; then
    echo "FAIL: $program loads what it should carry" >&2
    exit 1
  fi
  "$program" --version >/dev/null || {
    echo "FAIL: $program --version failed" >&2
    exit 1
  }
done
echo "PASS: $# programs carry gRPC and the C++ runtime"
