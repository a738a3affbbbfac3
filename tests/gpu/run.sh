#!/bin/bash
# tests/gpu/run.sh - everything that needs a GPU, in one call, in about five
# minutes: build, every GPU test, compute-sanitizer memcheck on one model, the
# GPU benchmark (G1-G6 of shared/reference/performance.md section 11) and
# PyTorch on the same GPU as its peer. Writes logs and JSON to $OUT (default
# build-gpu-run/out) and prints a short table. Exit 0 when every step passed
# or was skipped.
#
#     tests/gpu/run.sh                 (from anywhere; works in the repo root)
#
# Build: configures build-gpu-run (RelWithDebInfo, warnings not errors (DPC_WERROR's default), Ninja
# if present) and builds what
# it needs. Where that fails (a CUDA image without bison, flex, cJSON or a
# BLAS) or DPC_GPU_BUNDLE=1, it uses the binaries of build-gpu-bundle/ made
# by tests/gpu/bundle.sh on a development machine and carried along.
#
# Steps (each with its own time limit, logs in $OUT/<step>.log):
#   build        configure + build (or the bundle)
#   models       test_backend_cuda gpu models/*.dp: batch 1, 7, 64 on cuda:0
#                against the CPU backend; graph replays against the eager
#                forward; 2 and 4 replicas; the embedding error flag
#   run.<model>  check_gpu.py: `dpc run --devices cuda:0` against PyTorch
#                (float64) and the CPU backend, 2 and 4 replicas
#   memcheck     compute-sanitizer --tool memcheck on the transformer model
#   nccl         test_nccl gpu: the real NCCL broadcasts in place on cuda:0
#   ops          the per-op cases of tests/ops on cuda:0 against PyTorch
#   bench        bench_gpu: G1, G4, G2, G3, G6, G5 (JSON in $OUT/bench)
#   torch        bench_torch.py: PyTorch peers (JSON in $OUT/bench/torch.json)
#                (convolutions through cuDNN, fused where they can be: the
#                models with convs and tests/cuda/models/cudnn_blocks.dp)
#   nocudnn      the conv models of the models step with DPC_CUDNN=0 (the
#                own im2col + cuBLASLt convolutions; if time is left)
#   nographs     the models step again with DPC_CUDA_GRAPHS=0 (if time is left)
#   zoo          bench_zoo.py: models/zoo/*.dp at batch 1, 8, 64, dpc against
#                PyTorch eager on the same GPU (JSON in $OUT/bench/zoo.json);
#                its own DPC_GPU_ZOO_BUDGET seconds (default 150, 0 skips it)
#                after the BUDGET of the steps above
# The first four steps and ops run at the same time (correctness only); the
# benchmarks run alone afterwards.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
T0=$(date +%s)
BUDGET=${DPC_GPU_BUDGET:-290}            # seconds for the whole script
OUT=${OUT:-$root/build-gpu-run/out}
mkdir -p "$OUT" "$OUT/bench"
PY=${DPC_PYTHON:-$(command -v python3)}
export DPC_PYTHON=$PY
elapsed() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(elapsed)s] $*"; }

# record NAME STATUS SECONDS DETAIL (a line of $OUT/steps.txt: steps run in
# background subshells too)
record() {
    printf '%s|%s|%s|%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr -d '|')" >>"$OUT/steps.txt"
    log "$1: $2 ($3 s) $4"
}
rm -f "$OUT/steps.txt" "$OUT/run.status"

# run_step NAME LIMIT CMD...: runs with a time limit, logs to $OUT/NAME.log;
# exit 77 is a skip.
run_step() {
    local name=$1 limit=$2 t rc status
    shift 2
    t=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
    0) status=pass ;;
    77) status=skip ;;
    124 | 137) status=timeout ;;
    *) status="fail($rc)" ;;
    esac
    record "$name" "$status" $(( $(date +%s) - t )) "$(tail -n 1 "$OUT/$name.log" | cut -c1-100)"
}

# ---- the machine
{
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi -q 2>/dev/null | grep -E "Product Name|Driver Version|CUDA Version|Power Limit|Max Clocks|ECC Mode|MIG Mode" -A0 | head -20
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv 2>/dev/null
    "$PY" -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>/dev/null
} >"$OUT/machine.txt" 2>&1
log "machine: $(grep -m1 'Product Name' "$OUT/machine.txt" | sed 's/.*: //')"

# CUDA's libraries: the toolkit's, else those of the pip nvidia-* wheels.
cudalib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $("$PY" -c 'import glob, os, nvidia; p = list(nvidia.__path__)[0]
print(" ".join(sorted(set(os.path.dirname(f) for f in glob.glob(p + "/*/lib/lib*.so*")))))' 2>/dev/null); do
    [ -d "$d" ] && cudalib="$cudalib:$d"
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$cudalib"

# ---- build
BUILD=$root/build-gpu-run
BIN=""
t=$(date +%s)
if [ "${DPC_GPU_BUNDLE:-0}" != 1 ]; then
    gen=Ninja
    command -v ninja >/dev/null 2>&1 || gen="Unix Makefiles"
    if timeout 200 cmake -S "$root" -B "$BUILD" -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPC_PYTHON="$PY" \
        >"$OUT/build.log" 2>&1 &&
        timeout 200 cmake --build "$BUILD" -j"$(nproc)" --target dpc test_backend_cuda test_nccl bench_gpu >>"$OUT/build.log" 2>&1; then
        DPC=$BUILD/dpc
        TBC=$BUILD/tests/cuda/test_backend_cuda
        BENCH=$BUILD/tests/gpu/bench_gpu
        TNCCL=$BUILD/tests/cuda/test_nccl
        BIN=build
    fi
fi
if [ -z "$BIN" ]; then
    b=$root/build-gpu-bundle
    if [ -x "$b/bin/dpc" ]; then
        DPC=$b/bin/dpc TBC=$b/bin/test_backend_cuda BENCH=$b/bin/bench_gpu TNCCL=$b/bin/test_nccl BIN=bundle
        export LD_LIBRARY_PATH="$b/lib:$LD_LIBRARY_PATH"
        echo "using the prebuilt bundle $b" >>"$OUT/build.log"
    fi
fi
if [ -z "$BIN" ]; then
    record build fail $(( $(date +%s) - t )) "no build and no bundle: see $OUT/build.log"
    exit 1
fi
record build pass $(( $(date +%s) - t )) "$BIN"
export DPC_CACHE_DIR=${DPC_CACHE_DIR:-$BUILD/kcache}
mkdir -p "$DPC_CACHE_DIR"
unset DPC_CUDA_TF32 DPC_CUDA_GRAPHS DPC_CUDA_SYNC DPC_CUDNN
MODELS="$(ls "$root"/models/*.dp) $root/tests/cuda/models/cudnn_blocks.dp"
CONV_MODELS=$(grep -l Conv2d $MODELS)

# ---- correctness, all at once
run_step models 170 "$TBC" gpu $MODELS &
(
    t=$(date +%s)
    fails=0 n=0
    for m in $MODELS; do echo "$m"; done |
        xargs -P 6 -I{} sh -c 'n=$(basename {} .dp); timeout 170 "$0" "$1/tests/gpu/check_gpu.py" "$2" {} --python "$0" >"$3/run.$n.log" 2>&1; echo "$n $?" >>"$3/run.status"' \
            "$PY" "$root" "$DPC" "$OUT"
) &
if command -v compute-sanitizer >/dev/null 2>&1; then
    DPC_GPU_BATCHES=7 run_step memcheck 170 compute-sanitizer --tool memcheck --error-exitcode 99 \
        --leak-check no "$TBC" gpu "$root/models/transformer.dp" &
else
    record memcheck skip 0 "compute-sanitizer not found" &
fi
if [ -x "${TNCCL:-}" ]; then
    run_step nccl 60 "$TNCCL" gpu &
fi
if [ -f "$root/tests/ops/check_ops.py" ]; then
    run_step ops 170 "$PY" "$root/tests/gpu/check_ops_gpu.py" "$DPC" all --jobs 6 &
fi
wait
# the run.* results
if [ -f "$OUT/run.status" ]; then
    while read -r n rc; do
        case $rc in 0) s=pass ;; 77) s=skip ;; 124 | 137) s=timeout ;; *) s="fail($rc)" ;; esac
        record "run.$n" "$s" - "$(tail -n 1 "$OUT/run.$n.log" | cut -c1-80)"
    done <"$OUT/run.status"
fi

# ---- benchmarks, alone on the GPU
left=$(( BUDGET - $(elapsed) ))
if [ "$left" -gt 60 ]; then
    bdl=$(( left - 60 ))
    [ "$bdl" -gt 150 ] && bdl=150
    [ "$bdl" -lt 30 ] && bdl=30
    run_step bench $(( bdl + 60 )) "$BENCH" --out "$OUT/bench" --deadline "$bdl"
else
    record bench skip 0 "no time left"
fi
left=$(( BUDGET - $(elapsed) ))
if [ "$left" -gt 30 ]; then
    run_step torch $(( left )) "$PY" "$root/tests/gpu/bench_torch.py" --out "$OUT/bench" --deadline $(( left - 15 ))
else
    record torch skip 0 "no time left"
fi
left=$(( BUDGET - $(elapsed) ))
if [ "$left" -gt 40 ]; then
    DPC_CUDA_GRAPHS=0 run_step nographs $(( left - 5 )) "$TBC" gpu $MODELS
fi
left=$(( BUDGET - $(elapsed) ))
if [ "$left" -gt 30 ]; then
    DPC_CUDNN=0 run_step nocudnn $(( left - 5 )) "$TBC" gpu $CONV_MODELS
fi

# ---- the zoo at batch 1, 8, 64 (its own budget, after the others)
ZOO_BUDGET=${DPC_GPU_ZOO_BUDGET:-150}
if [ "$ZOO_BUDGET" -gt 0 ]; then
    run_step zoo $(( ZOO_BUDGET + 60 )) "$PY" "$root/tests/gpu/bench_zoo.py" "$DPC" --out "$OUT/bench" \
        --deadline "$ZOO_BUDGET"
fi

# ---- summary
echo
echo "=== dpc GPU run: $(grep -m1 'Product Name' "$OUT/machine.txt" | sed 's/.*: //'), $(elapsed) s ==="
printf '%-24s %-10s %6s  %s\n' step status secs detail
bad=0
while IFS='|' read -r name status secs detail; do
    printf '%-24s %-10s %6s  %s\n' "$name" "$status" "$secs" "$detail"
    case $status in pass | skip) ;; *) bad=1 ;; esac
done <"$OUT/steps.txt"
"$PY" - "$OUT" "$(elapsed)" <<'PYEOF' || true
import json, sys
out, secs = sys.argv[1], int(sys.argv[2])
steps = []
for line in open(out + '/steps.txt'):
    name, status, s, detail = (line.rstrip('\n').split('|') + ['', '', '', ''])[:4]
    steps.append({'step': name, 'status': status, 'seconds': s, 'detail': detail})
json.dump({'steps': steps, 'seconds': secs}, open(out + '/summary.json', 'w'), indent=1)
PYEOF
if [ -f "$OUT/bench.log" ]; then
    echo
    sed -n '/^G[1-6]  /,$p' "$OUT/bench.log" | grep -v '^bench_gpu:' | head -120
fi
[ -f "$OUT/torch.log" ] && { echo; grep -E '^  G[0-9]' "$OUT/torch.log" | head -60; }
[ -f "$OUT/zoo.log" ] && { echo; head -60 "$OUT/zoo.log"; }
echo
echo "logs and JSON: $OUT"
exit $bad
