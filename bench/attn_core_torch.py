"""PyTorch's time for bench/attn_core.dp: one thread, batch 8, float32.

    /usr/bin/python3 bench/attn_core_torch.py [--batch 8] [--iters 20]

Prints the median and the minimum of --iters timed forwards (after 3
warm-up runs), in ms, as `dpc bench` prints its own."""
import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402


def core(x, y, z):
    q, k, v = x.permute(0, 2, 1, 3), y.permute(0, 2, 1, 3), z.permute(0, 2, 1, 3)
    s = torch.matmul(q, k.transpose(-1, -2)) / 8.0
    p = torch.nn.functional.softmax(s, dim=-1)
    return torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x, y, z = (torch.randn(a.batch, 128, 12, 64, generator=g) for _ in range(3))
    with torch.no_grad():
        for _ in range(3):
            core(x, y, z)
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            core(x, y, z)
            ts.append((time.perf_counter() - t0) * 1e3)
    print(f"torch attn_core batch {a.batch}: median {statistics.median(ts):.2f} ms, min {min(ts):.2f} ms")


if __name__ == "__main__":
    main()
