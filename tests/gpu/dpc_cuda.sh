#!/bin/sh
# dpc_cuda.sh ARGS... - runs $DPC_REAL (the real dpc) with every `dpc run`
# moved to the GPU: no --devices becomes --devices cuda:0, and each cpu in a
# --devices list becomes cuda:0. Lets the CPU test drivers (tests/ops) check
# the CUDA backend against PyTorch unchanged.
if [ "$1" != run ]; then exec "$DPC_REAL" "$@"; fi
have=0
for a in "$@"; do [ "$a" = --devices ] && have=1; done
n=$#
i=0
prev=
for a in "$@"; do
    i=$((i + 1))
    if [ "$prev" = --devices ]; then a=$(printf '%s' "$a" | sed 's/cpu/cuda:0/g'); fi
    set -- "$@" "$a"
    prev=$a
done
shift "$n"
if [ "$have" = 0 ]; then set -- "$@" --devices cuda:0; fi
exec "$DPC_REAL" "$@"
