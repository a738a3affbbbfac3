#!/usr/bin/env python3
"""PyTorch on the same GPU as the peer of bench_gpu (G2, G3, G4).

    bench_torch.py [--out DIR] [--deadline SECONDS] [--quick]

Same shapes as bench_gpu.c; CUDA events around each iteration after
warm-ups, median; TF32 off unless a row says TF32. Writes DIR/torch.json and
prints a table. Exits 77 when torch or a GPU is missing.
"""
import argparse
import json
import os
import sys
import time

T0 = time.time()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.environ.get('OUT') or '.')
    ap.add_argument('--deadline', type=float, default=90)
    ap.add_argument('--quick', action='store_true')
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print('no torch: skipped')
        return 77
    if not torch.cuda.is_available():
        print('torch sees no GPU: skipped')
        return 77
    dev = torch.device('cuda:0')
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []

    def left():
        return time.time() - T0 < a.deadline

    def timeit(fn, budget=0.3):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        one = max(s.elapsed_time(e), 1e-3)
        iters = int(min(50, max(5, budget * 1000 / one)))
        if a.quick:
            iters = min(iters, 10)
        ts = []
        for _ in range(iters):
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        ts.sort()
        return ts[len(ts) // 2], ts[len(ts) // 10], ts[-1 - len(ts) // 10]

    def rec(bench, name, value, unit, extra=None):
        r = {'bench': bench, 'name': name, 'value': value, 'unit': unit}
        r.update(extra or {})
        rows.append(r)
        print('  %-4s %-56s %12.4g %s' % (bench, name, value, unit), flush=True)

    print('bench_torch: torch %s on %s' % (torch.__version__, torch.cuda.get_device_name(0)))
    with torch.no_grad():
        # G2: the elementwise chain (eager: one kernel per op), softmax, layer_norm
        n = (32 if a.quick else 128) * 1048576
        x = torch.randn(n, device=dev)
        r = torch.randn(n, device=dev)
        med, p10, p90 = timeit(lambda: F.gelu(x * 2.0 + 0.5) + r)
        rec('G2', 'torch eager gelu(x*2+0.5)+r, %d M floats' % (n >> 20), 3 * n * 4 / med / 1e6, 'GB/s',
            {'ms': med})
        del x, r
        for L in (1024, 4096):
            x = torch.randn(16384, L, device=dev)
            med, _, _ = timeit(lambda: torch.softmax(x, -1))
            rec('G2', 'torch softmax, 16384 rows of %d' % L, 2 * x.numel() * 4 / med / 1e6, 'GB/s', {'ms': med})
            ln = torch.nn.LayerNorm(L).to(dev)
            med, _, _ = timeit(lambda: ln(x))
            rec('G2', 'torch layer_norm, 16384 rows of %d' % L, 2 * x.numel() * 4 / med / 1e6, 'GB/s', {'ms': med})
            del x
        # G3: F.linear + activation
        for tf32 in (False, True):
            if not left():
                break
            torch.backends.cuda.matmul.allow_tf32 = tf32
            fc = torch.nn.Linear(1024, 4096).to(dev)
            for M in (64, 256, 4096):
                x = torch.randn(M, 1024, device=dev)
                for act, f in (('relu', F.relu), ('gelu', F.gelu)):
                    med, _, _ = timeit(lambda: f(fc(x)), 0.2)
                    rec('G3', 'torch linear+%s %s M=%d' % (act, 'TF32' if tf32 else 'f32', M), med * 1e3, 'us',
                        {'TFLOP/s': 2 * M * 4096 * 1024 / med / 1e9})
        torch.backends.cuda.matmul.allow_tf32 = False

        # G4: the same BERT-base layer (post-norm), eager and as a CUDA graph
        class Layer(torch.nn.Module):
            def __init__(s, d=768, h=12, f=3072):
                super().__init__()
                s.h = h
                s.q, s.k, s.v, s.o = (torch.nn.Linear(d, d) for _ in range(4))
                s.ln1, s.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
                s.ff1, s.ff2 = torch.nn.Linear(d, f), torch.nn.Linear(f, d)

            def forward(s, x):
                N, S, D = x.shape
                hd = D // s.h
                q = s.q(x).reshape(N, S, s.h, hd).transpose(1, 2)
                k = s.k(x).reshape(N, S, s.h, hd).permute(0, 2, 3, 1)
                v = s.v(x).reshape(N, S, s.h, hd).transpose(1, 2)
                att = torch.softmax(q @ k * 0.125, -1)
                y = (att @ v).transpose(1, 2).reshape(N, S, D)
                x = s.ln1(x + s.o(y))
                return s.ln2(x + s.ff2(F.gelu(s.ff1(x))))

        for depth in (1, 12):
            model = torch.nn.Sequential(*[Layer() for _ in range(depth)]).to(dev).eval()
            for N in (1, 8, 64):
                if not left():
                    break
                x = torch.randn(N, 128, 768, device=dev)
                med, _, _ = timeit(lambda: model(x), 0.4)
                rec('G4', 'torch eager %d layer%s f32 batch %d' % (depth, 's' if depth > 1 else '', N),
                    med * 1e3 / depth, 'us/layer')
                try:
                    g = torch.cuda.CUDAGraph()
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(2):
                            model(x)
                    torch.cuda.current_stream().wait_stream(s)
                    with torch.cuda.graph(g):
                        model(x)
                    med, _, _ = timeit(g.replay, 0.4)
                    rec('G4', 'torch CUDA graph %d layer%s f32 batch %d' % (depth, 's' if depth > 1 else '', N),
                        med * 1e3 / depth, 'us/layer')
                except Exception as ex:  # graphs are a bonus
                    print('  torch CUDA graph failed: %s' % ex)
            # the bf16 peer of dpc --dtype bf16: bf16 weights and activations
            mb = model.to(torch.bfloat16)
            for N in (1, 8, 64):
                if not left():
                    break
                x = torch.randn(N, 128, 768, device=dev, dtype=torch.bfloat16)
                med, _, _ = timeit(lambda: mb(x), 0.4)
                rec('G4', 'torch eager %d layer%s bf16 batch %d' % (depth, 's' if depth > 1 else '', N),
                    med * 1e3 / depth, 'us/layer')
            del model, mb
            torch.cuda.empty_cache()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'torch.json'), 'w') as f:
        json.dump({'bench': 'torch', 'torch': torch.__version__, 'device': torch.cuda.get_device_name(0),
                   'results': rows}, f, indent=1)
    print('bench_torch: %.1f s' % (time.time() - T0))
    return 0


if __name__ == '__main__':
    sys.exit(main())
