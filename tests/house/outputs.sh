#!/usr/bin/env bash
# outputs.sh DPC OUT - every printed output of dpc over every .dp of the tree,
# for a restructuring that must change none of them (issue 31):
#   tests/house/outputs.sh build/dpc /tmp/before   (on the old commit's build)
#   tests/house/outputs.sh build/dpc /tmp/after    (on the new one)
#   diff -r /tmp/before /tmp/after                 (empty: nothing changed)
# For each file: dpc print, ir (default, parsed, fused), source (cpu; cuda in
# f32, bf16, f16) and graph (its .dot), each with stderr and exit status, so
# diagnostics count too. Two files at a time; a few minutes.
set -u
dpc=$(realpath "$1"); out=$(realpath -m "$2")
mkdir -p "$out"
cd "$(dirname "$0")/../.."
find . -name '*.dp' -not -path './build*' -not -path '*/corpus/*' | sort > "$out/list"
one() {
  f=$1; dpc=$2; out=$3
  k=$(echo "$f" | sed 's|^\./||; s|/|__|g')
  run() { local tag=$1; shift; timeout 60 "$dpc" "$@" >"$out/$k.$tag" 2>&1; echo "rc=$?" >>"$out/$k.$tag"; }
  run print print "$f"
  run ir ir "$f"
  run irp ir "$f" --stage parsed
  run irf ir "$f" --stage fused
  run c source "$f"
  run cu source "$f" --target cuda
  run cubf source "$f" --target cuda --dtype bf16
  run cuh source "$f" --target cuda --dtype f16
  timeout 60 "$dpc" graph "$f" -o "$out/$k.dot" >"$out/$k.graph" 2>&1; echo "rc=$?" >>"$out/$k.graph"
}
export -f one
xargs -P2 -I{} bash -c 'one "$@"' _ {} "$dpc" "$out" < "$out/list"
