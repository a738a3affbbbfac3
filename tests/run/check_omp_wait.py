#!/usr/bin/python3
"""check_omp_wait.py DPC MODELS_DIR - `dpc run`, `bench` and `serve` wait
passively in OpenMP unless the user chose (cli/main.c, omp_passive_waits;
docs/performance.md, "Dense rows"): the process runs itself again with
OMP_WAIT_POLICY=passive, which its children inherit. A wrapper as CC (the
host compiler dpc runs for the kernels, with a fresh kernel cache) records
the OMP_WAIT_POLICY it sees: passive by default, the user's when set, unset
when the user set GOMP_SPINCOUNT instead.
"""
import os
import subprocess
import sys
import tempfile

dpc, models = sys.argv[1], sys.argv[2]
SIMPLE = os.path.join(models, "simple.dp")
failures = 0
with tempfile.TemporaryDirectory() as d:
    seen = os.path.join(d, "seen")
    cc = os.path.join(d, "cc.sh")
    with open(cc, "w") as f:
        f.write('#!/bin/sh\necho "policy=${OMP_WAIT_POLICY-unset}" >> "%s"\nexec %s "$@"\n'
                % (seen, os.environ.get("CC", "cc")))
    os.chmod(cc, 0o755)
    for n, (extra, want) in enumerate([({}, "passive"), ({"OMP_WAIT_POLICY": "active"}, "active"),
                                       ({"GOMP_SPINCOUNT": "5"}, "unset")]):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        env.update(extra, CC=cc, DPC_CACHE_DIR=os.path.join(d, "cache%d" % n))
        if os.path.exists(seen):
            os.remove(seen)
        p = subprocess.run([dpc, "bench", SIMPLE, "--batch", "1", "--iters", "1"], env=env, capture_output=True,
                           text=True, timeout=300)
        got = open(seen).read().split() if os.path.exists(seen) else []
        ok = p.returncode == 0 and got and all(g == "policy=" + want for g in got)
        if not ok:
            failures += 1
            print("FAIL %s: rc %d, the compiler saw %s, want policy=%s; %s"
                  % (extra or "no policy", p.returncode, got, want, p.stderr.strip()[-500:]))
print("check_omp_wait: %s" % ("all checks passed" if not failures else "%d failures" % failures))
sys.exit(1 if failures else 0)
