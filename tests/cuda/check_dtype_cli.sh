#!/bin/sh
# --dtype on the command line, without a GPU:
#   * `dpc source --target cuda --dtype bf16|f16` is the 16-bit dialect (every
#     float buffer a dpc_bf16/dpc_f16 pointer) and differs from the f32 one;
#   * `--dtype bf16` with CPU devices: exit 1, one line saying the CPU backend
#     computes in f32, no output file;
#   * an unknown dtype and `dpc source --target cpu --dtype bf16`: exit 2.
#     check_dtype_cli.sh DPC MODEL.dp     (a model with elementwise kernels)
set -u
dpc=$1 model=$2
py=${DPC_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$dpc" source "$model" --target cuda >"$d/f32.cu" || fail "source f32"
for p in bf16 f16; do
    "$dpc" source "$model" --target cuda --dtype $p >"$d/$p.cu" || fail "source --dtype $p"
    grep -q "dpc_$p \*__restrict__" "$d/$p.cu" || fail "$p: no dpc_$p buffer parameter"
    if grep -q "float \*__restrict__" "$d/$p.cu"; then fail "$p: a float buffer parameter is left"; fi
    grep -q "float \*__restrict__" "$d/f32.cu" || fail "f32: no float buffer parameter"
done

"$dpc" init "$model" -o "$d/w.safetensors" || fail "dpc init"
inputs=$("$py" "$here/../ref/make_inputs.py" "$model" --batch 2 -o "$d") || fail "make_inputs"
args=""
for i in $inputs; do args="$args --input $i"; done
# shellcheck disable=SC2086
"$dpc" run "$model" --weights "$d/w.safetensors" $args --devices cpu --dtype bf16 -o "$d/y.npy" 2>"$d/err"
rc=$?
cat "$d/err"
[ "$rc" -eq 1 ] || fail "cpu + bf16: exit status $rc, want 1"
grep -q "^dpc: error: bf16 storage needs CUDA devices" "$d/err" || fail "cpu + bf16: the message"
[ "$(wc -l <"$d/err")" -eq 1 ] || fail "cpu + bf16: more than one line"
[ ! -e "$d/y.npy" ] || fail "cpu + bf16: an output was written"

# shellcheck disable=SC2086
"$dpc" run "$model" --weights "$d/w.safetensors" $args --dtype f8 -o "$d/y.npy" 2>"$d/err"
rc=$?
[ "$rc" -eq 2 ] || fail "--dtype f8: exit status $rc, want 2"
grep -q "unknown dtype 'f8'" "$d/err" || fail "--dtype f8: the message: $(head -1 "$d/err")"
"$dpc" source "$model" --target cpu --dtype bf16 >/dev/null 2>"$d/err"
[ $? -eq 2 ] || fail "source --target cpu --dtype bf16 should be a usage error"
echo "ok"
