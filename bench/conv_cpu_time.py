#!/usr/bin/python3
"""CPU time per forward of a zoo model under the CPU backend's convolution
paths, back to back (docs/performance.md, "Convolutions through oneDNN
primitives"). CPU time (user + system of `dpc bench`) rather than wall time,
so a loaded machine still gives comparable figures; `--iters 1` is
subtracted, so compiling, loading and planning cancel.

    conv_cpu_time.py MODEL BATCH ITERS [ROUNDS] [--before OTHER_DPC] [--only before,nhwc,...]

Configurations: nhwc (the default: activations kept NHWC between convs),
nokeep (DPC_CONV_KEEP=0: NHWC primitives, reordered around every conv),
plain (NCHW), blocked (oneDNN's pick), im2col (no primitives).
"""
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_seconds(cmd, env):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main(argv):
    before = None
    if "--before" in argv:
        i = argv.index("--before")
        before = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    dpc = os.path.join(ROOT, "build", "dpc")
    cfgs = [("before", before, {})] if before else []
    only = None
    if "--only" in argv:
        i = argv.index("--only")
        only = argv[i + 1].split(",")
        argv = argv[:i] + argv[i + 2:]
    model, batch, n = argv[0], argv[1], int(argv[2])
    rounds = int(argv[3]) if len(argv) > 3 else 1
    cfgs += [("nhwc", dpc, {"DPC_CONV_LAYOUT": "nhwc"}), ("nokeep", dpc, {"DPC_CONV_KEEP": "0"}),
             ("plain", dpc, {"DPC_CONV_LAYOUT": "plain"}), ("blocked", dpc, {"DPC_CONV_LAYOUT": "blocked"}),
             ("im2col", dpc, {"DPC_CONV": "im2col"})]
    cfgs = [c for c in cfgs if not only or c[0] in only]
    for _ in range(rounds):
        for name, exe, extra in cfgs:
            env = dict(os.environ, **extra)
            base = [exe, "bench", os.path.join(ROOT, "models", "zoo", model + ".dp"), "--batch", batch, "--iters"]
            t1 = cpu_seconds(base + ["1"], env)
            tn = cpu_seconds(base + [str(n + 1)], env)
            print("%s batch %s %-8s CPU ms per forward: %.1f" % (model, batch, name, (tn - t1) / n * 1000), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
