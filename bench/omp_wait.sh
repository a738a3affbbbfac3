#!/bin/bash
# OpenMP wait policies side by side: dpc alone, one replica of two threads,
# batch 1, each configuration alternated three times (median µs of each run).
# docs/performance.md, "OpenMP's wait policy". Usage: bench/omp_wait.sh [build/dpc]
# Run it on a quiet machine, and again beside `sh -c 'while :; do :; done' &`.
D=${1:-build/dpc}
for m in efficientnet_b0 resnet18 bert vit_small; do
  extra=""; [ $m = bert ] && extra="--bind S=128"
  for rep in 1 2 3; do
    for cfg in GOMP_SPINCOUNT=300000 OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=10000; do
      t=$(env $cfg DPC_GEMM_THREADS=2 OMP_NUM_THREADS=2 "$D" bench models/zoo/$m.dp --batch 1 $extra --iters 40 --json |
          /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_us"])')
      echo "$m $cfg $t"
    done
  done
done | sort -s -k1,2 | awk '{k=$1" "$2; if (k!=p) {if (p!="") print line; line=k; p=k} line=line" "$3} END {print line}'
