#!/usr/bin/python3
"""CPU benchmark: dpc against PyTorch on the same machine, in one run.

For each model and batch size it times dpc's forward in-process
(`dpc bench --json`: compile and weight loading excluded) and PyTorch's
eager forward (torch.no_grad, eval, same thread count), and reports
dpc/PyTorch time and GFLOP/s against the measured FMA peak (bench/peak.c).
A second table measures data-parallel scaling at batch 256: one replica on
two GEMM threads versus two replicas (`--devices cpu,cpu`), next to
PyTorch's 1- and 2-thread runs (nn.DataParallel without GPUs runs the module
directly, so its fallback equals the plain run).

    /usr/bin/python3 bench/cpu_bench.py [--dpc build/dpc] [--dpc-alt build-obl/dpc] [--json out.json]
"""
import argparse, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'tests', 'ref'))


def dpc_bench(dpc, model, batch, devices='cpu', threads=None):
    env = dict(os.environ)
    if threads:
        env['DPC_GEMM_THREADS'] = str(threads)
        env['OMP_NUM_THREADS'] = str(threads)
    r = subprocess.run([dpc, 'bench', model, '--batch', str(batch), '--devices', devices, '--json'],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit('dpc bench failed: ' + r.stderr)
    return json.loads(r.stdout)


def torch_bench(model, batch, threads):
    import torch
    from dp2torch import load_model
    torch.set_num_threads(threads)
    m, info = load_model(model)
    m = m.module if isinstance(m, torch.nn.DataParallel) else m
    m.eval()
    xs = []
    for p in info['tensor_params']:
        shape = [batch if d is None else d for d in p['dims']]
        if p['dtype'] == 'i64':
            xs.append(torch.randint(0, 2, shape))
        else:
            xs.append(torch.randn(shape))
    times = []
    with torch.no_grad():
        for _ in range(3):
            m(*xs)
        t_end = time.perf_counter() + 1.0
        while time.perf_counter() < t_end or len(times) < 10:
            t0 = time.perf_counter()
            m(*xs)
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dpc', default=os.path.join(ROOT, 'build', 'dpc'))
    ap.add_argument('--dpc-alt', default=None, help='a second build (e.g. -DDPC_BLAS=openblas) to compare GEMM libraries')
    ap.add_argument('--json', default=None)
    ap.add_argument('--threads', type=int, default=0, help='GEMM/torch threads for every row (default: 1 at batch 1, all cores above)')
    a = ap.parse_args()
    peak_bin = '/tmp/dpc-peak'
    subprocess.run(['cc', '-O2', '-march=native', '-o', peak_bin, os.path.join(HERE, 'peak.c')], check=True)
    peak = json.loads(subprocess.run([peak_bin], capture_output=True, text=True, check=True).stdout)
    ncores = os.cpu_count()
    results = {'peak': peak, 'cores': ncores, 'rows': [], 'scaling': []}
    print('measured: FMA peak %.1f GFLOP/s per core, copy %.1f GB/s, %d cores' %
          (peak['fma_gflops_per_core'], peak['copy_gbytes_per_s'], ncores))
    print('\n%-15s %5s %3s %10s %10s %8s %9s %7s%s' % ('model', 'batch', 'thr', 'dpc us', 'torch us', 'torch/dpc',
                                                    'GFLOP/s', 'of peak', '   alt us' if a.dpc_alt else ''))
    for model in ['mlp', 'parallel_model']:
        path = os.path.join(ROOT, 'models', model + '.dp')
        for batch in [1, 64, 256]:
            threads = a.threads or (1 if batch == 1 else ncores)
            d = dpc_bench(a.dpc, path, batch, threads=threads)
            t = torch_bench(path, batch, threads)
            alt = dpc_bench(a.dpc_alt, path, batch, threads=threads) if a.dpc_alt else None
            frac = d['gflops'] / (peak['fma_gflops_per_core'] * threads)
            row = dict(model=model, batch=batch, threads=threads, dpc_us=d['median_us'], torch_us=t * 1e6,
                       speedup=t * 1e6 / d['median_us'], gflops=d['gflops'], of_peak=frac,
                       alt_us=alt['median_us'] if alt else None)
            results['rows'].append(row)
            print('%-15s %5d %3d %10.1f %10.1f %8.2fx %9.1f %6.0f%%%s' % (
                model, batch, threads, row['dpc_us'], row['torch_us'], row['speedup'], row['gflops'], 100 * frac,
                '  %8.1f' % row['alt_us'] if alt else ''))
    print('\nscaling at batch 256 (mlp):')
    path = os.path.join(ROOT, 'models', 'mlp.dp')
    one = dpc_bench(a.dpc, path, 256, 'cpu', threads=1)
    two_thr = dpc_bench(a.dpc, path, 256, 'cpu', threads=ncores)
    two_rep = dpc_bench(a.dpc, path, 256, ','.join(['cpu'] * ncores), threads=1)
    t1, t2 = torch_bench(path, 256, 1), torch_bench(path, 256, ncores)
    eff = one['median_us'] / (two_rep['median_us'] * ncores)
    results['scaling'] = dict(dpc_1rep_1thr_us=one['median_us'], dpc_1rep_nthr_us=two_thr['median_us'],
                              dpc_nrep_us=two_rep['median_us'], efficiency=eff, torch_1thr_us=t1 * 1e6,
                              torch_nthr_us=t2 * 1e6)
    print('  dpc 1 replica, 1 GEMM thread     %9.1f us' % one['median_us'])
    print('  dpc 1 replica, %d GEMM threads    %9.1f us' % (ncores, two_thr['median_us']))
    print('  dpc %d replicas (--devices)       %9.1f us  efficiency %.2f' % (ncores, two_rep['median_us'], eff))
    print('  torch 1 thread                   %9.1f us' % (t1 * 1e6))
    print('  torch %d threads (= DataParallel CPU fallback) %9.1f us' % (ncores, t2 * 1e6))
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
