#!/bin/sh
# No program or library of ours looks for shared libraries in the current
# directory: an empty RPATH/RUNPATH entry (CMake pads a build tree's RUNPATH
# with them when only the installed file has one) makes the loader try
# "libudev.so.1" relative to wherever the program is started, so anyone who
# can write there runs code in it. Arguments: the files to check.
set -u
status=0
for file in "$@"; do
  [ -f "$file" ] || { echo "FAIL: $file does not exist"; status=1; continue; }
  paths=$(readelf -d "$file" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
  [ -n "$paths" ] || continue
  for path in $(echo "$paths" | tr ':' '\n' | sed 's/^$/<empty>/'); do
    case "$path" in
      '<empty>' | [!/\$]*)
        echo "FAIL: $file searches a relative directory ($paths)"
        status=1
        break ;;
    esac
  done
done
[ "$status" -eq 0 ] && echo "PASS: $# files search only absolute or \$ORIGIN paths"
exit "$status"
