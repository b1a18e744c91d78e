#!/usr/bin/env bash
# The installed package as a vendor and an operator meet it, after
# `cmake --install` into PREFIX:
#   1. the installed programs run from the prefix (no LD_LIBRARY_PATH) and
#      no installed program or library searches a relative directory for
#      shared libraries;
#   2. examples/accel-plugin builds out of the tree through
#      find_package(libtopology COMPONENTS deviceplugin) and through
#      pkg-config libtopology-deviceplugin;
#   3. both builds register with the installed `topology-manager serve` on a
#      generated dual-socket machine (GPUs and NICs), a pod asking for two
#      GPUs and one NIC is admitted on one NUMA node, and the admission shows
#      what each plugin's Allocate returned;
#   4. the GPU plugin's /readyz answers 200 and its /metrics count the
#      allocation;
#   5. SIGTERM stops both plugins and serve with exit 0;
#   6. the example's own tests build against the installed test kit only
#      (find_package(libtopology COMPONENTS testing) and pkg-config
#      libtopology-testing) and pass, with the installed
#      topology-sysfs-fixture writing the machine above;
#   7. a program on libtopology::common alone builds through
#      find_package(libtopology COMPONENTS common) and pkg-config
#      libtopology-common, and runs; a program on the installed DRA
#      framework builds through find_package(libtopology COMPONENTS
#      draplugin) and pkg-config libtopology-draplugin in a copy of the
#      prefix without the device plugin framework (the DRA framework needs
#      only libtopology::common), serves its sockets and stops; so does
#      examples/accel-dra-driver (the DRA guide's), which then runs, and its
#      tests build on the installed DRA test kit only (COMPONENTS draplugin
#      testing, pkg-config libtopology-dra-testing) and pass.
# Usage: package_test.sh PREFIX LIBDIR EXAMPLES_DIR WORK_DIR GENERATOR CXX
#                        CXXFLAGS LDFLAGS
set -euo pipefail
prefix=$1 libdir=$2 examples=$3 work=$4 generator=$5
cxx=$6 cxxflags=$7 ldflags=$8
fixture_tool=$prefix/bin/topology-sysfs-fixture

fail() {
  echo "package_test: $*" >&2
  for log in "$work"/*.log; do
    [ -f "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }
  done
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
unset LD_LIBRARY_PATH
# Unix socket paths are limited to 107 bytes: the kubelet's side lives in a
# short temporary folder, not in the build tree.
run=$(mktemp -d /tmp/topology-package.XXXXXX)

echo "== installed programs run from the prefix"
for program in topology-info topology-manager topology-device-plugin \
  topology-dra-driver topology-sysfs-fixture; do
  "$prefix/bin/$program" --version || fail "$program --version failed"
done
# The gRPC half of topology-manager, found by it in libexec/libtopology/.
"$prefix/libexec/libtopology/topology-manager-grpc" --version ||
  fail "libexec/libtopology/topology-manager-grpc --version failed"
sh "$(dirname "$0")/runpath_test.sh" "$prefix/bin/topology-info" \
  "$prefix/bin/topology-manager" "$prefix/bin/topology-device-plugin" \
  "$prefix/bin/topology-dra-driver" \
  "$prefix/bin/topology-sysfs-fixture" \
  "$prefix/libexec/libtopology/topology-manager-grpc" \
  "$prefix/$libdir"/libtopology*.so.[0-9]* ||
  fail "an installed file searches a relative directory for libraries"

echo "== accel-plugin through find_package(libtopology COMPONENTS deviceplugin)"
cmake -S "$examples/accel-plugin" -B "$work/cmake-build" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DACCEL_PLUGIN_TESTS=ON \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$cxxflags" \
  -DCMAKE_EXE_LINKER_FLAGS="$ldflags" >"$work/cmake-configure.log" 2>&1 ||
  fail "configure with find_package failed"
cmake --build "$work/cmake-build" >"$work/cmake-build.log" 2>&1 ||
  fail "build with find_package failed"

echo "== accel-plugin through pkg-config libtopology-deviceplugin"
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" make -s -C "$examples/accel-plugin" \
  OUT="$work/pc-accel-plugin" CXX="$cxx" CXXFLAGS="$cxxflags" \
  LDFLAGS="$ldflags" >"$work/pkg-config-build.log" 2>&1 ||
  fail "build with pkg-config failed"
# Started as built, without LD_LIBRARY_PATH: the .pc files carry the RPATH.
"$work/pc-accel-plugin" --version >/dev/null ||
  fail "the pkg-config build does not start"

echo "== the guide's pkg-config lines, as written"
for pc in libtopology libtopology-deviceplugin; do
  for variable in prefix libdir includedir; do
    value=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config \
      --variable="$variable" "$pc")
    [ -d "$value" ] || fail "$pc: --variable=$variable is $value, no directory"
  done
  got=$(cd "$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config \
    --variable=libdir "$pc")" && pwd -P)
  [ "$got" = "$(cd "$prefix/$libdir" && pwd -P)" ] ||
    fail "$pc: libdir is $got, not $prefix/$libdir"
done
(cd "$work" && PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" \
  "$cxx" -std=c++20 $cxxflags -Wall -Wextra -Wmissing-include-dirs -Werror \
  "$examples/accel-plugin/main.cc" -o guide-accel-plugin \
  $(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs \
    libtopology-deviceplugin) $ldflags) >"$work/guide-build.log" 2>&1 ||
  fail "the guide's compile line failed (see $work/guide-build.log)"
"$work/guide-accel-plugin" --version >/dev/null ||
  fail "the guide's compile line makes a program that does not start"

echo "== both register with topology-manager serve; a pod is admitted"
"$fixture_tool" dual-socket-8gpu "$work/machine" >/dev/null
mkdir -p "$run/device-plugins"
control="$run/control.sock"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$run"
}
trap cleanup EXIT
"$prefix/bin/topology-manager" serve --plugin-dir "$run/device-plugins" \
  --host-root "$work/machine" --control-socket "$control" --node-name pkg-node \
  --topology-manager-policy single-numa-node --topology-manager-scope pod \
  2>"$work/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
for _ in $(seq 200); do [ -S "$control" ] && break; sleep 0.05; done
[ -S "$control" ] || fail "serve did not create its control socket"

http_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/cmake-build/accel-plugin" --resource example.com/gpu --class 0302 \
  --host-root "$work/machine" --plugin-dir "$run/device-plugins" \
  --http-addr "127.0.0.1:$http_port" 2>"$work/gpu-plugin.log" &
gpu_pid=$!
pids+=("$gpu_pid")
"$work/pc-accel-plugin" --resource example.com/nic --class 0200 \
  --host-root "$work/machine" --plugin-dir "$run/device-plugins" \
  2>"$work/nic-plugin.log" &
nic_pid=$!
pids+=("$nic_pid")

ready=""
for _ in $(seq 200); do
  if "$prefix/bin/topology-manager" status --format json --control-socket "$control" \
      2>/dev/null | python3 -c '
import json, sys
resources = {r["name"]: r["allocatable"] for r in json.load(sys.stdin)["resources"]}
sys.exit(0 if resources.get("example.com/gpu") == 8 and resources.get("example.com/nic") == 4 else 1)'; then
    ready=yes
    break
  fi
  sleep 0.05
done
[ -n "$ready" ] || fail "the two plugins did not register 8 GPUs and 4 NICs"

cat >"$work/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default, uid: 6f1c2a9e-0000-4000-8000-000000000001}
spec:
  containers:
    - name: main
      resources:
        limits: {example.com/gpu: 2, example.com/nic: 1}
YAML
"$prefix/bin/topology-manager" admit --format json --control-socket "$control" \
  "$work/pod.yaml" >"$work/admit.json" 2>"$work/admit.log" ||
  fail "the pod was not admitted: $(cat "$work/admit.json")"
python3 - "$work/admit.json" <<'PY' || fail "unexpected admission: $(cat "$work/admit.json")"
import json, sys
pod = json.loads(open(sys.argv[1]).readline())  # one line per pod
assert pod["admitted"], pod
container = pod["containers"][0]
gpus = container["devices"]["example.com/gpu"]
nics = container["devices"]["example.com/nic"]
assert len(gpus) == 2 and len(nics) == 1, container
assert container["numa_nodes"] is not None and len(container["numa_nodes"]) == 1, container
responses = container["allocate_responses"]
assert responses["example.com/gpu"]["envs"]["ACCEL_VISIBLE_DEVICES"] == ",".join(gpus), responses
assert responses["example.com/nic"]["cdi_devices"] == ["example.com/accel=" + nics[0]], responses
print("admitted on NUMA node", container["numa_nodes"][0], "with", gpus, nics)
PY

echo "== the example's /readyz and /metrics"
python3 - "$http_port" <<'PY' || fail "unexpected /readyz or /metrics"
import sys, time, urllib.error, urllib.request
base = "http://127.0.0.1:" + sys.argv[1]
deadline = time.monotonic() + 10
while True:  # ready once the plugin has seen its Register reply
    try:
        if urllib.request.urlopen(base + "/readyz", timeout=5).status == 200:
            break
    except urllib.error.HTTPError:
        pass
    assert time.monotonic() < deadline, "never ready"
    time.sleep(0.05)
metrics = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
for line in ('accel_plugin_build_info{version="1.0.0",api_version="v1beta1"} 1',
             'accel_plugin_registered{resource="example.com/gpu"} 1',
             'accel_plugin_allocations_total{resource="example.com/gpu"} 1',
             'accel_plugin_devices{resource="example.com/gpu",health="Healthy"} 8'):
    assert line in metrics, (line, metrics)
print("ready; metrics count the allocation")
PY

echo "== SIGTERM stops everything"
kill -TERM "$gpu_pid" "$nic_pid" "$serve_pid"
for pid in "$gpu_pid" "$nic_pid" "$serve_pid"; do
  wait "$pid" || fail "process $pid exited with $? after SIGTERM"
done
pids=()

echo "== the example's tests, on the installed test kit"
"$fixture_tool" --list >"$work/fixtures.txt" || fail "topology-sysfs-fixture --list failed"
grep -q '^dual-socket-accel' "$work/fixtures.txt" ||
  fail "topology-sysfs-fixture --list lacks dual-socket-accel"
ctest --test-dir "$work/cmake-build" --output-on-failure \
  >"$work/example-ctest.log" 2>&1 ||
  fail "the example's tests failed (find_package build; $work/example-ctest.log)"
grep -q "tests passed, 0 tests failed out of [1-9]" "$work/example-ctest.log" ||
  fail "the example's tests did not run (see $work/example-ctest.log)"
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" make -s -C "$examples/accel-plugin" \
  check OUT="$work/pc-accel-plugin" TEST_OUT="$work/pc-accel-plugin-test" \
  CXX="$cxx" CXXFLAGS="$cxxflags" LDFLAGS="$ldflags" \
  >"$work/pkg-config-check.log" 2>&1 ||
  fail "make check through pkg-config libtopology-testing failed"
# consumer_both_ways NAME PREFIX PACKAGE: tests/cmake/NAME_consumer built
# against PREFIX through find_package and through pkg-config PACKAGE, each
# build run with a directory of its own; fails naming the step and its log.
consumer_both_ways() {
  local name=$1 from=$2 package=$3
  local consumer
  consumer=$(dirname "$0")/${name}_consumer
  cmake -S "$consumer" -B "$work/$name-build" -G "$generator" \
    -DCMAKE_PREFIX_PATH="$from" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
    >"$work/$name-cmake.log" 2>&1 &&
    cmake --build "$work/$name-build" >>"$work/$name-cmake.log" 2>&1 ||
    fail "the $name consumer does not build through find_package ($work/$name-cmake.log)"
  "$work/$name-build/$name-consumer" "$run/$name-cmake" ||
    fail "the $name consumer (find_package build) failed"
  (cd "$work" && "$cxx" -std=c++20 $cxxflags -Wall -Wextra -Werror \
    "$consumer/main.cc" -o "$name-consumer-pc" \
    $(PKG_CONFIG_PATH="$from/$libdir/pkgconfig" pkg-config --cflags --libs \
      "$package") $ldflags) >"$work/$name-pc.log" 2>&1 ||
    fail "the $name consumer does not build through pkg-config ($work/$name-pc.log)"
  "$work/$name-consumer-pc" "$run/$name-pc" ||
    fail "the $name consumer (pkg-config build) failed"
}
echo "== libtopology::common alone, through find_package and pkg-config"
consumer_both_ways common "$prefix" libtopology-common
echo "== the DRA framework without the device plugin framework, through find_package and pkg-config"
dra_prefix=$work/prefix-without-deviceplugin
rm -rf "$dra_prefix"
cp -a "$prefix" "$dra_prefix"
rm -rf "$dra_prefix/$libdir/libtopology-deviceplugin.a" \
  "$dra_prefix/$libdir/pkgconfig/libtopology-deviceplugin.pc" \
  "$dra_prefix/$libdir/cmake/libtopology/"libtopologyDevicepluginTargets*.cmake \
  "$dra_prefix/include/topology/plugin"
consumer_both_ways draplugin "$dra_prefix" libtopology-draplugin
echo "== accel-dra-driver, through find_package and pkg-config"
cmake -S "$examples/accel-dra-driver" -B "$work/dra-example-build" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DACCEL_DRA_DRIVER_TESTS=ON \
  -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
  >"$work/dra-example-cmake.log" 2>&1 &&
  cmake --build "$work/dra-example-build" >>"$work/dra-example-cmake.log" 2>&1 ||
  fail "accel-dra-driver does not build through find_package ($work/dra-example-cmake.log)"
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" make -s -C "$examples/accel-dra-driver" \
  OUT="$work/pc-accel-dra-driver" CXX="$cxx" CXXFLAGS="$cxxflags" \
  LDFLAGS="$ldflags" >"$work/dra-example-pc.log" 2>&1 ||
  fail "accel-dra-driver does not build through pkg-config ($work/dra-example-pc.log)"
for program in "$work/dra-example-build/accel-dra-driver" "$work/pc-accel-dra-driver"; do
  "$program" --version >/dev/null || fail "$program does not start"
done
echo "== accel-dra-driver's tests, on the installed DRA test kit"
ctest --test-dir "$work/dra-example-build" --output-on-failure \
  >"$work/dra-example-ctest.log" 2>&1 ||
  fail "accel-dra-driver's tests failed (find_package build; $work/dra-example-ctest.log)"
grep -q "tests passed, 0 tests failed out of [1-9]" "$work/dra-example-ctest.log" ||
  fail "accel-dra-driver's tests did not run (see $work/dra-example-ctest.log)"
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" make -s -C "$examples/accel-dra-driver" \
  check TEST_OUT="$work/pc-accel-dra-driver-test" \
  CXX="$cxx" CXXFLAGS="$cxxflags" LDFLAGS="$ldflags" \
  >"$work/dra-example-check.log" 2>&1 ||
  fail "make check through pkg-config libtopology-dra-testing failed ($work/dra-example-check.log)"
echo "package test passed"
