#!/usr/bin/env bash
# Builds dpc and runs the whole test suite: the release build through CTest,
# then an ASan+UBSan build over the parsers and bad-input tests, and a
# ThreadSanitizer build over the data-parallel tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc)

# Each stage's wall time, printed as it ends and as a table at the end (also
# when a stage fails): CI's limit is 90 minutes on 2 cores, our goal 40.
t_start=$(date +%s)
t_stage=$t_start
stage_name=""
stage_times=()
stage() {
  local now
  now=$(date +%s)
  if [ -n "$stage_name" ]; then
    stage_times+=("$(printf '%-34s %6d s' "$stage_name" $((now - t_stage)))")
    echo "-- $stage_name: $((now - t_stage)) s"
  fi
  stage_name=$1
  t_stage=$now
  [ -n "$1" ] && echo "== $1"
  return 0
}
stage_report() {
  stage ""
  echo "== stage times"
  printf '%s\n' "${stage_times[@]}"
  printf '%-34s %6d s\n' "total" $(($(date +%s) - t_start))
}
trap stage_report EXIT

# The main build is Release (-O3) with warnings as errors: a user's build of
# any type must not meet a warning that CI has not seen.
stage "release build (setup.sh)"
DPC_BUILD_TYPE=Release DPC_WERROR=ON bash .ci/setup.sh >/dev/null

stage "release: ctest"
# What the ASan pass below runs anyway runs there only: the slow sweeps
# (every header byte and truncation of a .dpa, every malformed ONNX model, the
# cuDNN refusals on the fake library) and the front end's print/ir/bad-input
# checks against PyTorch. The same checks, with memory errors caught too.
asan_only='^(artifact_api|artifact_cli|onnx_malformed|cuda_cudnn_emu_refuse|cuda_cudnn_emu_fake)$|^(print_|ir_|bad_|front_)'
ctest --test-dir build -j"$jobs" --output-on-failure -E "$asan_only"
# ONNX's own conformance cases (tests/onnx/node_tests.py): the counts of the
# shards, summed, from the log of the run above
awk '/^[0-9]+ of [0-9]+ node \(shard/ {p += $1; t += $3} /^[0-9]+ of [0-9]+ pytorch cases pass/ {print "ONNX: " $0}
     END {if (t) print "ONNX: " p " of " t " node cases pass"}' build/Testing/Temporary/LastTest.log

stage "ASan+UBSan build"
# parsers, bad input, fuzz corpus replay, the escaper, the CUDA host side on fake drivers
# The per-byte injection sweeps (security_inject_path|rootpath|module|member|param,
# hundreds of dpc runs each) run in the release pass only: here the escaper
# itself, the injection regression and the .dpa case.
# OpenBLAS (pthreads) under the sanitizers: oneDNN's OpenMP runtime is not
# instrumented, so TSan would report its internal synchronisation.
# -O1: the sanitized tests run about twice as fast as at -O0, with the same
# reports (ASan's own advice for speed)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DDPC_WERROR=ON -DDPC_SANITIZE=address -DDPC_BLAS=openblas >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
# One pattern a line, so that each feature adds its own line.
asan_tests=(
  'replay_npy|replay_safetensors|replay_dpa|replay_dp$|replay_serve'
  '^security_(escape|inject_regression|inject_dpa)$'
  'print_|^ir_|bad_|front_|^io_|run_bad_input|run_outputs'
  '^dp_'
  '^run_seams_fuse$|^run_prepare_once'
  '^run_conv_(wino|stem|fc|mb)$'
  '^artifact_api|^artifact_cli'
  '^cuda\.(backend|nccl|driver|cli)'
  '^cuda_cudnn_(backend|emu_fake|emu_refuse)$'
  '^serve_(batcher|protocol|batching|faults|sequence|hostile)$'
  '^onnx_mha$'
  'replay_onnx|^onnx_cli$|^onnx_ops$|^onnx_opsets$|^onnx_malformed$'
  '^run_tensor_members$'
  '^onnx_(arity|budget|files)$'
)
stage "ASan+UBSan: ctest"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure -R "$(IFS='|'; echo "${asan_tests[*]}")"

stage "fuzz_onnx build"
# 60 s of libFuzzer (clang, ASan+UBSan) grown from the committed corpus
# A bounded run on every landing, beyond the replay above: the importer is the
# newest reader. A crash fails CI; its input is printed and kept in
# build-fuzz/ (add it to tests/corpus/onnx/ with the fix).
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DDPC_WERROR=ON -DDPC_FUZZ=ON -DDPC_BLAS=openblas >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_onnx >/dev/null
stage "fuzz_onnx: 60 s"
scratch=$(mktemp -d)
if ! (cd build-fuzz && ./tests/fuzz/fuzz_onnx -max_total_time=60 -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
        "$scratch" ../tests/corpus/onnx >fuzz_onnx.log 2>&1); then
  tail -60 build-fuzz/fuzz_onnx.log
  ls build-fuzz/crash-* build-fuzz/timeout-* build-fuzz/oom-* 2>/dev/null | while read -r f; do echo "$f:"; od -c "$f" | head -20; done
  rm -rf "$scratch"
  echo "fuzz_onnx found a failure" >&2
  exit 1
fi
rm -rf "$scratch"
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' build-fuzz/fuzz_onnx.log || true

stage "TSan build (dpc and tests/dp)"
# data-parallel runtime: only what the ^dp tests run (tests_dp, tests/CMakeLists.txt)
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DDPC_WERROR=ON -DDPC_SANITIZE=thread -DDPC_BLAS=openblas >/dev/null
cmake --build build-tsan -j"$jobs" --target tests_dp >/dev/null
stage "TSan: ctest"
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -j"$jobs" --output-on-failure -R '^dp'
