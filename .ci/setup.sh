#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds dpc, and runs the main
# job on the seed model: print it, initialise weights, run a batch.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake make gcc clang libclang-rt-14-dev flex bison pkg-config libcjson-dev libdnnl-dev libopenblas-dev
      python3-numpy python3-torch python3-torchvision graphviz libopenmpi-dev openmpi-bin
      libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: the CUDA toolkit (nvcc, NVRTC, cuBLAS) is required to build; install it under /usr/local/cuda" >&2
  exit 1
fi
export PATH=/usr/local/cuda/bin:$PATH

# A user's build: warnings stay warnings. The test command (.ci/test.sh)
# sets DPC_BUILD_TYPE=Release and DPC_WERROR=ON, so that CI sees -O3's
# warnings as errors.
cmake -S . -B build -DCMAKE_BUILD_TYPE="${DPC_BUILD_TYPE:-RelWithDebInfo}" -DDPC_WERROR="${DPC_WERROR:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"

echo "== dpc print models/parallel_model.dp"
build/dpc print models/parallel_model.dp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/dpc init models/parallel_model.dp -o "$work/w.safetensors" --seed 0
/usr/bin/python3 -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(0).standard_normal((8, 1, 17, 17)).astype(np.float32))"
echo "== dpc run models/parallel_model.dp (batch 8 over cpu,cpu)"
build/dpc run models/parallel_model.dp --weights "$work/w.safetensors" --input "$work/x.npy" \
  --devices cpu,cpu -v -o "$work/y.npy"
/usr/bin/python3 -c "import numpy as np; y = np.load('$work/y.npy'); print('output', y.shape, y.dtype); print(y[:2])"
