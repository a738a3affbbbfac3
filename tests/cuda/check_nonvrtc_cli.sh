#!/bin/sh
# `dpc compile --arch sm_90` where NVRTC cannot be loaded (DPC_NVRTC_LIBRARY
# names a missing file): exit 1 with one error line naming the library and
# the variable, and no artifact. Then the same compile with the default
# NVRTC (the toolkit's, not linked but dlopen'ed) writes one.
#     check_nonvrtc_cli.sh DPC MODEL.dp
set -u
dpc=$1 model=$2
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
export DPC_CACHE_DIR="$d/kcache"
DPC_NVRTC_LIBRARY=/nonexistent/dpc-test/libnvrtc.so.13 "$dpc" compile --arch sm_90 "$model" -o "$d/x.dpa" 2>"$d/err"
rc=$?
cat "$d/err"
[ "$rc" -eq 1 ] || { echo "exit status $rc, want 1"; exit 1; }
grep -q "^dpc: error: .*NVRTC could not be loaded (/nonexistent/dpc-test/libnvrtc.so.13).*DPC_NVRTC_LIBRARY" "$d/err" ||
    { echo "the message does not name the library and DPC_NVRTC_LIBRARY"; exit 1; }
[ "$(wc -l < "$d/err")" -eq 1 ] || { echo "more than one line of error"; exit 1; }
[ ! -e "$d/x.dpa" ] || { echo "an artifact was written"; exit 1; }
unset DPC_NVRTC_LIBRARY
"$dpc" compile --arch sm_90 "$model" -o "$d/x.dpa" || { echo "compile with the default NVRTC failed"; exit 1; }
[ -s "$d/x.dpa" ] || { echo "no artifact"; exit 1; }
echo "ok"
