#!/bin/sh
# topology-manager loads no gRPC, Protocol Buffers, abseil, OpenSSL or glog:
# merge, --help, --version, admit, release and status run in it (the
# control socket's client speaks gRPC's protocol over nghttp2, linked in);
# serve is handed to topology-manager-grpc by exec. Without that program it
# says where it looked.
#   light_manager_test.sh BUILT-TOPOLOGY-MANAGER
set -eu
light=$1
if readelf -d "$light" | grep -E 'NEEDED.*(grpc|gpr|protobuf|absl|ssl|crypto|glog|yaml|nghttp2)'; then
  echo "FAIL: $light loads libraries merge does not use" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$light" "$work/topology-manager"
"$work/topology-manager" --version | grep -q '^topology-manager '
printf '%s' '{"policy":"best-effort","numa_nodes":[0,1],"providers":[{"gpu":[{"mask":[0],"preferred":true}]}]}' |
  "$work/topology-manager" merge | grep -q '"preferred":true'
# The control commands need only this program: alone, status reaches for
# the socket and says it is not there.
out=$("$work/topology-manager" status --control-socket "$work/none.sock" 2>&1) && exit 1
echo "$out" | grep -q "topology-manager status: cannot reach $work/none.sock" || {
  echo "FAIL: unexpected message: $out" >&2
  exit 1
}
if out=$("$work/topology-manager" serve --plugin-dir "$work" 2>&1); then
  echo "FAIL: serve ran without topology-manager-grpc" >&2
  exit 1
fi
echo "$out" | grep -q "cannot run topology-manager-grpc: tried $work/topology-manager-grpc (No such file or directory), " || {
  echo "FAIL: unexpected message: $out" >&2
  exit 1
}
echo "ok: $light"
