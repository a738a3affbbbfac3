#!/bin/sh
# `dpc run --devices cuda:0` where no CUDA driver can be loaded: exit 1 with
# one error line that says so, and no output file.
#     check_nodriver_cli.sh DPC MODEL.dp     (DPC_CUDA_DRIVER names a missing library)
set -u
dpc=$1 model=$2
py=${DPC_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
"$dpc" init "$model" -o "$d/w.safetensors" || { echo "dpc init failed"; exit 1; }
inputs=$("$py" "$here/../ref/make_inputs.py" "$model" --batch 2 -o "$d") || { echo "make_inputs failed"; exit 1; }
args=""
for i in $inputs; do args="$args --input $i"; done
# shellcheck disable=SC2086
"$dpc" run "$model" --weights "$d/w.safetensors" $args --devices cuda:0 -o "$d/y.npy" 2>"$d/err"
rc=$?
cat "$d/err"
[ "$rc" -eq 1 ] || { echo "exit status $rc, want 1"; exit 1; }
grep -q "^dpc: error: no CUDA driver" "$d/err" || { echo "the message does not say there is no CUDA driver"; exit 1; }
[ "$(wc -l < "$d/err")" -eq 1 ] || { echo "more than one line of error"; exit 1; }
[ ! -e "$d/y.npy" ] || { echo "an output was written"; exit 1; }
echo "ok"
