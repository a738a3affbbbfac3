#!/bin/sh
# bundle.sh - prebuilt GPU test binaries for a machine that cannot build dpc
# (a GPU image without bison, flex, cJSON or a BLAS): builds a Release tree
# in build-gpu-bundle.build and copies into build-gpu-bundle/ the binaries
# run.sh needs and the shared libraries they use that a CUDA image may lack
# (oneDNN or OpenBLAS, OpenCL loader, OpenMP runtime). CUDA's own libraries
# (NVRTC, cuBLASLt) come from the GPU machine. About 45 MB: carry it with
# the device call (carry: ["build-gpu-bundle"]); run.sh uses it when its own
# build fails, or always with DPC_GPU_BUNDLE=1.
#
#     tests/gpu/bundle.sh            (from the repository root)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build-gpu-bundle
gen=Ninja
command -v ninja >/dev/null 2>&1 || gen="Unix Makefiles"
cmake -S "$root" -B "$root/build-gpu-bundle.build" -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build-gpu-bundle.build" -j"$(nproc)" --target dpc test_backend_cuda bench_gpu test_emit_cuda test_nccl
rm -rf "$out/bin" "$out/lib"
mkdir -p "$out/bin" "$out/lib"
cp "$root/build-gpu-bundle.build/dpc" "$root/build-gpu-bundle.build/tests/cuda/test_backend_cuda" "$root/build-gpu-bundle.build/tests/gpu/bench_gpu" \
   "$root/build-gpu-bundle.build/tests/cuda/test_emit_cuda" "$root/build-gpu-bundle.build/tests/cuda/test_nccl" "$out/bin/"
for b in "$out"/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
    case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    libnvrtc*|libcublas*|libcudart*|libcuda.so*) ;; # the GPU machine's own CUDA
    *) cp -L "$lib" "$out/lib/" ;;
    esac
done
echo "bundle: $(du -sh "$out/bin" "$out/lib" | awk '{print $1}' | tr '\n' ' ')in $out (bin, lib)"
ls "$out/lib"
