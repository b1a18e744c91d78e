#!/usr/bin/env python3
"""Link launcher for the programs that speak gRPC (CXX_LINKER_LAUNCHER).

Debian ships gRPC, Protocol Buffers, abseil, OpenSSL, c-ares, re2 and zlib
as shared libraries and as archives, but their CMake packages import only
the shared ones. A program linked against them maps about 60 shared
objects at start: their relocations and symbol lookups are most of its
start-up, and their symbol tables much of its resident memory. This
launcher runs the link command it is given with every one of those
libraries that has an archive beside it taken from the archive instead,
all in one --start-group (their archives refer to each other), followed by
what their pkg-config --static files add; glog, gflags and yaml-cpp too, and
then, no C++ library being left shared, the C++ runtime. Each library is
either linked in or loaded, never both. The C libraries (libc, libm,
libudev, hwloc) stay shared.

Usage: static_grpc_link.py <compiler> <link arguments...>
"""
import os
import re
import subprocess
import sys

LINKED_IN = re.compile(
    r"lib(grpc\+\+|grpc|gpr|upb|address_sorting|re2|cares|protobuf|"
    r"absl_[a-z0-9_]+|ssl|crypto|z|glog|gflags|yaml-cpp)"
    r"\.so(\.[0-9.]+)?$")
# C++ libraries: once none of them is left shared, the C++ runtime is
# linked in too (a shared one would bring its own copy of it).
CXX_SHARED = re.compile(r"lib(grpc\+\+|protobuf|absl_|glog|gflags|yaml-cpp|"
                        r"re2|stdc\+\+)")


def archive_for(path):
    """The archive beside a shared library, or None."""
    match = LINKED_IN.search(os.path.basename(path))
    if not match or not os.path.isabs(path):
        return None
    archive = os.path.join(os.path.dirname(path), f"lib{match.group(1)}.a")
    return archive if os.path.isfile(archive) else None


def pkg_config_libraries(directories):
    """What grpc++, protobuf, glog and yaml-cpp need when linked statically:
    archives where there are, else the -l flags (libunwind stays shared:
    its archive defines the unwinder the static libgcc also defines)."""
    try:
        libs = subprocess.run(
            ["pkg-config", "--static", "--libs-only-l", "grpc++", "protobuf",
             "libglog", "yaml-cpp"],
            capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return [], []
    archives, flags = [], []
    for flag in libs:
        name = flag[2:]
        archive = None
        for directory in directories:
            archive = archive_for(os.path.join(directory, f"lib{name}.so"))
            if archive:
                break
        if archive:
            archives.append(archive)
        elif flag not in flags:
            flags.append(flag)
    return archives, flags


def main():
    command = sys.argv[1:]
    if not command:
        sys.exit("static_grpc_link.py: no link command given")
    kept, archives = [], []
    for arg in command:
        archive = archive_for(arg)
        if archive:
            if archive not in archives:
                archives.append(archive)
        else:
            kept.append(arg)
    if not archives:
        os.execvp(command[0], command)
    directories = sorted({os.path.dirname(a) for a in archives})
    extra_archives, flags = pkg_config_libraries(directories)
    for archive in extra_archives:
        if archive not in archives:
            archives.append(archive)
    kept += (["-Wl,--start-group"] + archives + ["-Wl,--end-group"] + flags +
             ["-ldl", "-pthread"])
    if not any(".so" in arg for arg in kept
               if CXX_SHARED.search(os.path.basename(arg))):
        kept += ["-static-libstdc++", "-static-libgcc"]
    # Archives that do not fit together (another distribution's build
    # flags) must not fail the build: the shared libraries still link.
    linked = subprocess.run(kept, capture_output=True, text=True)
    if linked.returncode == 0:
        sys.stdout.write(linked.stdout)
        sys.stderr.write(linked.stderr)
        return
    sys.stderr.write("static_grpc_link.py: linking gRPC in failed; linking "
                     "the shared libraries instead. The linker said:\n" +
                     linked.stderr[-2000:])
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
